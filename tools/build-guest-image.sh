#!/usr/bin/env bash
# Builds volmig-guest, the small Linux guest of the demo and the tests,
# from Debian packages without installing them on this host: the kernel
# of linux-image-cloud-amd64 and a busybox-static initramfs whose /init
# (tools/guest/init) writes to or checksums each data disk.
#
# Usage: tools/build-guest-image.sh [OUTDIR]   (default build/guest-image)
# OUTDIR gets vmlinuz, initrd.gz, cmdline, and disk.raw: a bootable FAT
# disk (syslinux) with the same kernel and initramfs, for servers that
# boot from a volume through the firmware.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/guest-image}")
if [ -s "$out/vmlinuz" ] && [ -s "$out/disk.raw" ] \
        && [ "$out/initrd.gz" -nt tools/guest/init ] \
        && [ "$out/initrd.gz" -nt tools/build-guest-image.sh ]; then
    echo "volmig-guest is built already in $out"
    exit 0
fi

need_apt=()
for tool in syslinux:syslinux mcopy:mtools mkfs.fat:dosfstools \
            cpio:cpio; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool#*:}")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${need_apt[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 \
             | sed -n 's/.*Depends: \(linux-image-[^ ]*\)/\1/p' | head -n 1)
# apt's sandbox user cannot write into a mktemp directory.
chown _apt "$work" 2>/dev/null || true
apt-get download -q "$kernel_pkg" busybox-static >/dev/null
dpkg-deb -x linux-image-*.deb kernel
dpkg-deb -x busybox-static_*.deb busybox

root=initramfs
mkdir -p "$root"/{bin,dev,proc,sys,run,lib/modules}
cp busybox/bin/busybox "$root/bin/"
for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
# No modules.dep in the package: insmod in dependency order.
order="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
       virtio_pci virtio_blk evdev button"
for module in $order; do
    find kernel/lib/modules -name "$module.ko*" -exec cp {} \
        "$root/lib/modules/" \;
done
xz -d "$root"/lib/modules/*.xz 2>/dev/null || true
echo $order > "$root/lib/modules/order"
cp "$OLDPWD/tools/guest/init" "$root/init"
chmod 755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -9) > initrd.gz

mkdir -p "$out"
cp kernel/boot/vmlinuz-* "$out/vmlinuz"
cp initrd.gz "$out/initrd.gz"
cmdline='console=ttyS0 panic=-1'
echo "$cmdline" > "$out/cmdline"

# The same guest on a bootable disk: a FAT file system with syslinux,
# the size of a small volume.
truncate -s 64M disk.raw
mkfs.fat -n VOLMIG disk.raw >/dev/null
printf 'DEFAULT linux\nLABEL linux\n  KERNEL vmlinuz\n  INITRD initrd.gz\n  APPEND %s\n' \
    "$cmdline" > syslinux.cfg
mcopy -i disk.raw "$out/vmlinuz" "$out/initrd.gz" syslinux.cfg ::/
syslinux --install disk.raw
mv disk.raw "$out/disk.raw"
echo "volmig-guest built in $out: $kernel_pkg, $(du -h "$out/initrd.gz" | cut -f1) initramfs"

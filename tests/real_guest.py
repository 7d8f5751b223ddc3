"""volmig-guest in tests: its images registered, its console read.

The image is what ``tools/build-guest-image.sh`` builds (``.ci/run`` and
``tools/bootstrap.sh`` run it). ``volmig-guest-r1`` is the same guest
writing to region 1 of its disks, so two guests can share a volume
read/write without writing over each other.
"""

import os
import shutil
import subprocess  # nosec B404
import tempfile

from volmig.compute.drivers import images
from volmig.demo import writes as guest_writes

BUILD = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'build',
                     'guest-image')
IMAGES = {'volmig-guest': '', 'volmig-guest-r1': ' VOLMIG_REGION=1'}
# The tests' writers rest 50 ms between blocks: unthrottled, each guest's
# writer keeps a core busy under TCG, and two test workers' guests starved
# the services the tests are about on a 2-core machine. A block costs the
# guest about 24 ms of host CPU, so a writer takes some 45% of a core and
# acknowledges about 12 blocks a second; every one is checked.
TEST_INTERVAL = 0.05


def _built(name: str) -> str:
    path = os.path.join(BUILD, name)
    if not os.path.exists(path):
        raise RuntimeError('volmig-guest is not built: run '
                           'tools/build-guest-image.sh')
    return path


def disk() -> str:
    """volmig-guest on a disk the firmware boots (syslinux)."""
    return _built('disk.raw')


def register(image_dir: str, interval: float = TEST_INTERVAL) -> None:
    """The images, their writers resting ``interval`` seconds between
    blocks (0: as fast as they can)."""
    _built('vmlinuz')
    with open(os.path.join(BUILD, 'cmdline')) as handle:
        cmdline = handle.read().strip()
    store = images.ImageStore(image_dir)
    for name, extra in IMAGES.items():
        store.register(name, kernel=os.path.join(BUILD, 'vmlinuz'),
                       initrd=os.path.join(BUILD, 'initrd.gz'),
                       cmdline='%s VOLMIG_INTERVAL=%g%s' % (
                           cmdline, interval, extra),
                       disk=os.path.join(BUILD, 'disk.raw'))


def fill(path: str, mib: int) -> None:
    """Random data in a volume's file up to ``mib`` MiB, so a copy has
    something to move, around the writer's region (its first SLOTS
    blocks), which stays zeros: the check reads a slot the guest has not
    written yet as zeros, and a short run may not have written them all.
    """
    with open(path, 'r+b') as handle:
        handle.seek(guest_writes.SLOTS * guest_writes.BLOCK)
        while handle.tell() < mib * 1024 * 1024:
            handle.write(os.urandom(1024 * 1024))
        os.fsync(handle.fileno())


# Where a guest booted from a volume writes on it: the region past the
# boot disk's 64 MiB file system.
BOOT_REGION = 64


def boot_volume(path: str, interval: float = TEST_INTERVAL,
                writes_itself: bool = True) -> None:
    """Make the volume at ``path`` a boot disk of volmig-guest (the
    firmware boots it, no image needed) that writes to itself as well, in
    ``BOOT_REGION`` (unless not ``writes_itself``), resting ``interval``
    seconds between blocks."""
    with open(disk(), 'rb') as image, open(path, 'r+b') as volume:
        shutil.copyfileobj(image, volume)
        os.fsync(volume.fileno())
    with open(os.path.join(BUILD, 'cmdline')) as handle:
        cmdline = '%s VOLMIG_INTERVAL=%g' % (handle.read().strip(),
                                             interval)
    if writes_itself:
        cmdline += ' VOLMIG_BOOT_REGION=%d' % BOOT_REGION
    with tempfile.TemporaryDirectory() as work:
        config = os.path.join(work, 'syslinux.cfg')
        with open(config, 'w') as out:
            out.write('DEFAULT linux\nLABEL linux\n  KERNEL vmlinuz\n'
                      '  INITRD initrd.gz\n  APPEND %s\n' % cmdline)
        # mtools writes inside the FAT image, in place.
        subprocess.run(['mcopy', '-o', '-i', path, config, '::/'],
                       check=True, capture_output=True)

"""One guest of the libvirt driver: its record and its domain XML.

The agent keeps each guest's record in ``guest.json`` in the guest's
directory under the agent's state path, beside the serial console's log
and the overlays of its disks, as the qemu driver does. The domain is
transient: libvirt runs it, and the agent defines it again from the
record at each start. libvirt's live XML and block jobs say where each
disk is now; the record says what the agent asked for.
"""

import shutil
from xml.etree import ElementTree  # nosec B405 -- libvirt's own XML

from volmig.compute.drivers import guests

PREFIX = 'volmig-'
# Others may pass through, not list: each file keeps its own mode.
SEARCHABLE = 0o711


def name(uuid: str) -> str:
    return PREFIX + uuid


class Guest(guests.GuestRecord):
    """A guest's record: ``{image_ref, uid, disks: {volume_id: disk}}``.

    A disk is ``{volume_id, attachment_id, attach_mode, multiattach,
    boot_index, target, path, overlay, front}``; ``overlay`` is the qcow2
    file on top of ``path`` while a live migration holds the guest's
    writes. ``front`` is the empty qcow2 file a read-only disk is read
    through, backed by ``path``: its switch is then a shallow block copy
    onto a new front backed by dst, which writes nothing, and dst is
    only ever a backing file, opened read-only, which any number of
    guests share. A copy onto dst itself would need it to itself.
    """

    # The guest's QEMU, a user of its own, opens its overlays here.
    DIRECTORY_MODE = SEARCHABLE

    def __init__(self, directory: str, uuid: str):
        super().__init__(directory, uuid, {'disks': {}})

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def free_target(disks) -> str:
    """The first virtio name none of ``disks`` has."""
    taken = {disk['target'] for disk in disks}
    return next('vd' + chr(ord('a') + index) for index in range(26)
                if 'vd' + chr(ord('a') + index) not in taken)


def disk_xml(disk: dict, direct_io: bool) -> str:
    return ElementTree.tostring(disk_element(disk, direct_io),
                                encoding='unicode')


def disk_element(disk: dict, direct_io: bool) -> ElementTree.Element:
    """The ``<disk>`` of a volume, on top of its overlay or front if it
    has one."""
    root = ElementTree.Element('disk', type='file', device='disk')
    top = disk.get('overlay') or disk.get('front')
    source_file = top or disk['path']
    driver = {'name': 'qemu', 'type': 'qcow2' if top else 'raw'}
    # O_DIRECT, as the qemu driver opens volumes: dirty page cache would
    # lengthen the pause of the switch-over.
    driver.update({'cache': 'none', 'io': 'native'} if direct_io
                  else {'cache': 'writethrough'})
    ElementTree.SubElement(root, 'driver', driver)
    ElementTree.SubElement(root, 'source', file=source_file)
    if top:
        backing = ElementTree.SubElement(root, 'backingStore', type='file')
        ElementTree.SubElement(backing, 'format', type='raw')
        ElementTree.SubElement(backing, 'source', file=disk['path'])
    ElementTree.SubElement(root, 'target', dev=disk['target'], bus='virtio')
    ElementTree.SubElement(root, 'serial').text = guests.serial(
        disk['volume_id'])
    if disk['attach_mode'] == 'ro':
        ElementTree.SubElement(root, 'readonly')
    if disk.get('multiattach'):
        # Other writers are allowed only on a multiattach volume.
        ElementTree.SubElement(root, 'shareable')
    if disk.get('boot_index') == 0:
        ElementTree.SubElement(root, 'boot', order='1')
    return root


def domain_xml(guest: Guest, conf, accel: str, image: dict | None) -> str:
    root = ElementTree.Element('domain', type='kvm' if accel == 'kvm'
                               else 'qemu')
    ElementTree.SubElement(root, 'name').text = name(guest.uuid)
    ElementTree.SubElement(root, 'uuid').text = guest.uuid
    ElementTree.SubElement(root, 'memory', unit='MiB').text = str(
        conf.qemu.memory_mb)
    ElementTree.SubElement(root, 'vcpu').text = '1'
    os_ = ElementTree.SubElement(root, 'os')
    ElementTree.SubElement(os_, 'type', arch='x86_64',
                           machine='q35').text = 'hvm'
    if image and image.get('kernel'):
        ElementTree.SubElement(os_, 'kernel').text = image['kernel']
        if image.get('initrd'):
            ElementTree.SubElement(os_, 'initrd').text = image['initrd']
        ElementTree.SubElement(os_, 'cmdline').text = image.get(
            'cmdline') or ''
    features = ElementTree.SubElement(root, 'features')
    ElementTree.SubElement(features, 'acpi')
    if guest.record.get('uid') is not None:
        # QEMU runs as a user of its own, and libvirt gives it the
        # guest's files for as long as it uses them (dynamic_ownership).
        label = ElementTree.SubElement(root, 'seclabel', type='static',
                                       model='dac', relabel='yes')
        ElementTree.SubElement(label, 'label').text = '+%d:+%d' % (
            guest.record['uid'], guest.record['uid'])
    devices = ElementTree.SubElement(root, 'devices')
    ElementTree.SubElement(devices, 'emulator').text = (
        shutil.which(conf.qemu.binary) or conf.qemu.binary)
    ElementTree.SubElement(devices, 'controller', type='usb', model='none')
    ElementTree.SubElement(devices, 'controller', type='pci', index='0',
                           model='pcie-root')
    # Empty root ports: where volumes are hot-plugged.
    for index in range(conf.qemu.max_disks):
        ElementTree.SubElement(devices, 'controller', type='pci',
                               index=str(index + 1), model='pcie-root-port')
    for disk in sorted(guest.disks.values(), key=lambda d: d['target']):
        devices.append(disk_element(disk, conf.qemu.direct_io))
    serial = ElementTree.SubElement(devices, 'serial', type='file')
    ElementTree.SubElement(serial, 'source', path=guest.path('console.log'),
                           append='on')
    ElementTree.SubElement(serial, 'target', port='0')
    ElementTree.SubElement(devices, 'memballoon', model='none')
    return ElementTree.tostring(root, encoding='unicode')


def snapshot_xml(guest: Guest, disk: dict, overlay: str) -> str:
    """Only this disk goes on top of ``overlay``: libvirt would take every
    disk of the domain otherwise."""
    disks = ''.join(
        "<disk name='%s' snapshot='external' type='file'><driver "
        "type='qcow2'/><source file='%s'/></disk>" % (other['target'],
                                                        overlay)
        if other['target'] == disk['target'] else
        "<disk name='%s' snapshot='no'/>" % other['target']
        for other in guest.disks.values())
    return '<domainsnapshot><disks>%s</disks></domainsnapshot>' % disks


def copy_xml(path: str, fmt: str) -> str:
    return ("<disk type='file'><driver type='%s'/><source file='%s'/>"
            "</disk>" % (fmt, path))


def live_disk(xml: str, target: str) -> dict | None:
    """Where a disk of the running domain is: ``{source, backing}``
    (``backing`` None for a single file), or None if it has no such
    disk."""
    # libvirtd's own answer, not outside input.
    root = ElementTree.fromstring(xml)  # noqa: S314  # nosec B314
    for disk in root.iter('disk'):
        found = disk.find('target')
        if found is None or found.get('dev') != target:
            continue
        source = disk.find('source')
        backing = disk.find('backingStore/source')
        return {'source': source.get('file') if source is not None
                else None,
                'backing': backing.get('file') if backing is not None
                else None}
    return None

"""What the two drivers that run QEMU (``qemu`` and ``libvirt``) keep
alike for a guest: its accelerator, its disks on record and their
serials, its image, its user and its console log. Where a disk sits in
the machine (a PCIe slot, a libvirt target) is each driver's own.
"""

import json
import os
import threading
import typing

from oslo_log import log as logging

from volmig import atomic_file
from volmig import exception
from volmig import states
from volmig.compute import volumes as volumes_mod
from volmig.compute.drivers import images as images_mod
from volmig.compute.drivers import journal as journal_mod
from volmig.compute.drivers.qemu import confinement
from volmig.conf import compute as compute_conf

LOG = logging.getLogger(__name__)


def accelerator(conf) -> str:
    if conf.qemu.accel != 'auto':
        return conf.qemu.accel
    # /dev/kvm alone is not enough: the paravirtual nested module
    # (kvm_pvm) fails on a stock kernel's instructions.
    hardware = any(os.path.isdir('/sys/module/%s' % module)
                   for module in ('kvm_intel', 'kvm_amd'))
    return 'kvm' if hardware else 'tcg'


def serial(volume_id: str) -> str:
    """The disk's virtio serial, as the guest sees it; at most 20 bytes."""
    return volume_id[:20]


def console_tail(path: str, length: int | None) -> str:
    """The last ``length`` lines of a console log (all for None)."""
    try:
        with open(path, 'rb') as handle:
            text = handle.read().decode('utf-8', 'replace')
    except FileNotFoundError:
        return ''
    lines = text.splitlines(keepends=True)
    return ''.join(lines if length is None else lines[-length:]
                   if length else [])


def check_dst(disk: dict, dst_path: str, migration_id: str) -> None:
    """dst exists and has src's size, before anything switches."""
    try:
        dst_size = os.stat(dst_path).st_size
    except FileNotFoundError:
        raise exception.DestinationMismatch(
            what='volume', migration_id=migration_id,
            reason='%s does not exist' % dst_path)
    src_size = os.stat(disk['path']).st_size
    if dst_size != src_size:
        raise exception.DestinationMismatch(
            what='volume', migration_id=migration_id,
            reason='it has %d bytes, src has %d' % (dst_size, src_size))


class GuestRecord:
    """A guest's directory under the agent's state path, and its record
    there (``guest.json``): each driver's guest is one."""

    # The directory's mode, where the guest's QEMU must pass through it.
    DIRECTORY_MODE: int | None = None

    def __init__(self, directory: str, uuid: str, record: dict):
        self.directory = directory
        self.uuid = uuid
        self.lock = threading.RLock()
        self.record = record

    @property
    def disks(self) -> dict:
        return self.record['disks']

    def path(self, filename: str) -> str:
        return os.path.join(self.directory, filename)

    def load(self) -> typing.Self:
        with open(self.path('guest.json')) as handle:
            self.record = json.load(handle)
        return self

    def save(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        if self.DIRECTORY_MODE is not None:
            os.chmod(self.directory, self.DIRECTORY_MODE)
        atomic_file.write_json(self.path('guest.json'), self.record)


class GuestRecords:
    """A mixin of the drivers; each guest has ``uuid``, ``lock``,
    ``record``, ``disks``, ``path()`` and ``save()``."""

    # Who starts QEMU as the guest's user: the agent, or libvirtd.
    USER_SWITCHED_BY_AGENT = True

    if typing.TYPE_CHECKING:
        conf: typing.Any

    def __init__(self, conf):
        super().__init__(conf)
        root = compute_conf.state_path(conf)
        # A directory a guest, and the job journal, under the state path.
        self._guests_dir = os.path.join(root, 'guests')
        self.journal = journal_mod.Journal(os.path.join(root, 'jobs'))
        self.images = images_mod.ImageStore(conf.qemu.image_dir)
        self.volumes = volumes_mod.VolumeConnector(conf)
        self._guests: dict[str, typing.Any] = {}
        # One uid a guest: picked under this.
        self._users = threading.Lock()

    def _guest(self, instance) -> typing.Any:
        try:
            return self._guests[instance['uuid']]
        except KeyError:
            raise exception.InstanceNotFound(instance_uuid=instance['uuid'])

    def _image(self, guest) -> dict | None:
        name = guest.record.get('image_ref')
        return self.images.get(name) if name else None

    def _boot_image(self, guest, instance) -> dict | None:
        """Record the server's image; a kernel boots, a disk image not."""
        guest.record['image_ref'] = instance.get('image_ref')
        image = self._image(guest)
        if image and not image.get('kernel'):
            raise exception.DriverError(
                action='boot from image %s' % image['name'],
                reason='it is a disk image: create a volume from it and '
                'boot from the volume (boot_index 0)')
        return image

    def _give_user(self, guest) -> None:
        """A uid of its own for the guest's QEMU, kept while it lives."""
        with self._users:
            if guest.record.get('uid') is None:
                taken = {other.record.get('uid')
                         for other in self._guests.values()}
                guest.record['uid'] = confinement.pick_uid(
                    self.conf, taken, by_agent=self.USER_SWITCHED_BY_AGENT)
                guest.save()

    def _new_disk(self, bdm: dict, **place) -> dict:
        return dict({'volume_id': bdm['volume_id'],
                     'attachment_id': bdm['attachment_id'],
                     'attach_mode': bdm['attach_mode'],
                     'path': self.volumes.path(bdm['connection_info']),
                     'multiattach': bool(bdm['connection_info'].get(
                         'multiattach')),
                     'boot_index': bdm.get('boot_index'),
                     'overlay': None}, **place)

    def _set_disks(self, guest, block_devices,
                   place: typing.Callable[[dict], dict]) -> None:
        """The disks of ``block_devices``, each kept where it was; a new
        one goes where ``place(the disks so far)`` says."""
        disks: dict[str, dict] = {}
        # The boot disk first, where the firmware looks.
        for bdm in sorted(block_devices, key=lambda bdm: (
                bdm.get('boot_index') is None, bdm.get('boot_index') or 0)):
            disk = guest.disks.get(bdm['volume_id']) or self._new_disk(
                bdm, **place(disks))
            disk.update(attachment_id=bdm['attachment_id'],
                        attach_mode=bdm['attach_mode'],
                        path=self.volumes.path(bdm['connection_info']))
            disks[bdm['volume_id']] = disk
        guest.record['disks'] = disks
        guest.save()

    # A disk's attach and detach: the record is saved once the running
    # guest has the disk, or has let it go. The hypervisor's part is each
    # driver's.

    def _place(self, guest) -> dict:
        """Where a new disk sits in the machine."""
        raise NotImplementedError

    def _plug(self, guest, disk) -> None:
        """Give the disk to the guest, if it runs."""
        raise NotImplementedError

    def _unplug(self, guest, disk) -> None:
        """Take the disk from the guest, if it runs; raises if the guest
        keeps it."""
        raise NotImplementedError

    def _detached(self, disk) -> None:
        """Drop what the disk left behind once it is off the record."""

    def attach_volume(self, instance, bdm):
        guest = self._guest(instance)
        with guest.lock:
            disk = self._new_disk(bdm, **self._place(guest))
            self._plug(guest, disk)
            guest.disks[bdm['volume_id']] = disk
            guest.save()

    def detach_volume(self, instance, bdm):
        guest = self._guest(instance)
        with guest.lock:
            disk = guest.disks.get(bdm['volume_id'])
            if disk is None:
                return
            self._unplug(guest, disk)
            del guest.disks[bdm['volume_id']]
            guest.save()
            self._detached(disk)

    def repoint(self, guest, disk, new_bdm, path: str) -> None:
        """The disk is the new volume from now on."""
        del guest.disks[disk['volume_id']]
        disk.update(volume_id=new_bdm['volume_id'], path=path,
                    attachment_id=new_bdm['attachment_id'])
        guest.disks[disk['volume_id']] = disk
        guest.save()

    @staticmethod
    def _swappable(guest, old_bdm) -> dict:
        """The disk of a legacy swap: not one a migration holds."""
        disk = guest.disks[old_bdm['volume_id']]
        if disk.get('overlay'):
            raise exception.DriverError(
                action='swap volume %s' % disk['volume_id'],
                reason='a volume migration has it on an overlay')
        return disk

    @staticmethod
    def _offline(guest, running: bool, migration) -> bool:
        """Whether a start has nothing to do: the migration is offline
        (refused while the guest runs), or its guest went down."""
        if migration['mode'] == states.MODE_LIVE and running:
            return False
        if running:
            raise exception.InstanceMustBeShutOff(
                host=migration['host'], instance_uuid=guest.uuid)
        if migration['mode'] == states.MODE_LIVE:
            # The guest powered off or died since it was seen running:
            # nothing writes to src, so this is offline.
            LOG.warning('Guest %s is not running: volume migration %s goes '
                        'on offline', guest.uuid, migration['id'])
        return True

    def swaps_to_recover(self) -> list[dict]:
        return self.journal.swaps()

    def get_console_output(self, instance, length):
        return console_tail(self._guest(instance).path('console.log'),
                            length)

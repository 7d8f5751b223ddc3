"""The libvirt driver: guests as libvirt domains of QEMU, on the
hypervisor manager that operators already run, monitor and debug with
``virsh``.

This module is the guests' life (build, power, attach and detach); the
connection to libvirtd is in ``connection``, the live migration in
``migration``, the legacy swap in ``swap``. Both run QEMU
as the qemu driver does: the same ``[qemu]`` settings (accelerator,
memory, disk ports, O_DIRECT, images), and each guest's QEMU as a user of
its own, which libvirt gives the guest's files while it uses them.
"""

import contextlib
import os
import shutil
import time
import typing

import libvirt
from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute.drivers import base
from volmig.compute.drivers import guests
from volmig.compute.drivers.libvirt import connection as libvirtd
from volmig.compute.drivers.libvirt import domain
from volmig.compute.drivers.libvirt import migration
from volmig.compute.drivers.libvirt import swap

LOG = logging.getLogger(__name__)

# Seconds between looks at a domain that is shutting down or releasing a
# disk.
POLL_INTERVAL = 0.1

def _next_target(guest) -> typing.Callable[[dict], dict]:
    """A new disk's place: the first virtio name no disk has."""
    return lambda disks: {'target': domain.free_target(
        list(guest.disks.values()) + list(disks.values()))}


class LibvirtDriver(libvirtd.Libvirtd, migration.LiveMigration,
                    swap.LegacySwap, guests.GuestRecords, base.ComputeDriver):

    # libvirtd starts QEMU as the guest's user.
    USER_SWITCHED_BY_AGENT = False

    @property
    def capabilities(self):
        return {base.LIVE_VOLUME_MIGRATION: True, base.MULTIATTACH: True,
                base.READONLY_ATTACH: True}

    # Agent start and stop.

    def init_host(self, host):
        os.makedirs(self._guests_dir, exist_ok=True)
        os.chmod(self._guests_dir, domain.SEARCHABLE)
        for uuid in sorted(os.listdir(self._guests_dir)):
            guest = domain.Guest(os.path.join(self._guests_dir, uuid), uuid)
            try:
                self._guests[uuid] = guest.load()
            except FileNotFoundError:
                continue
        self.connection()

    def stop_guests(self) -> None:
        for guest in self._guests.values():
            with guest.lock:
                self._power_down(guest, self.conf.compute.shutdown_timeout)

    # Guests.

    def _launch(self, guest) -> None:
        for disk in guest.disks.values():
            self._front(guest, disk)
        guest.save()
        xml = domain.domain_xml(guest, self.conf,
                                guests.accelerator(self.conf),
                                self._boot_files(guest))
        try:
            self.connection().createXML(xml, 0)
        except libvirt.libvirtError as exc:
            raise libvirtd.failed('start guest %s' % guest.uuid, exc)

    def _front(self, guest, disk) -> None:
        """A read-only disk is read through a front of its own (see
        ``domain.Guest``), made anew before a QEMU opens it."""
        if disk['attach_mode'] != 'ro' or disk.get('overlay'):
            return
        last = disk.get('front')
        disk['front'] = self.new_top(guest, disk['path'],
                                     'front-%s.qcow2' % disk['volume_id'])
        if last not in (None, disk['front']):
            # A switch's front, which no QEMU reads any more.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(last)

    def _boot_files(self, guest) -> dict | None:
        """The guest's image, with its kernel and initrd copied into the
        guest's directory, as Nova keeps them per instance: libvirt gives
        each file to the guest's own user while it runs, and refuses
        another guest, of another user, a file that one holds."""
        image = self._image(guest)
        if not image or not image.get('kernel'):
            return image
        own = dict(image)
        for key in ('kernel', 'initrd'):
            if image.get(key):
                own[key] = guest.path(key)
                shutil.copyfile(image[key], own[key])
        return own

    def spawn(self, instance, block_devices):
        guest = domain.Guest(os.path.join(self._guests_dir,
                                          instance['uuid']),
                             instance['uuid'])
        with guest.lock:
            self._boot_image(guest, instance)
            self._set_disks(guest, block_devices, _next_target(guest))
            self._give_user(guest)
            self._guests[guest.uuid] = guest
            self._launch(guest)

    def _destroy_domain(self, guest) -> None:
        found = self.live_domain(guest)
        if found is None:
            return
        try:
            found.destroy()
        except libvirt.libvirtError as exc:
            if self.live_domain(guest) is not None:
                raise libvirtd.failed('stop guest %s' % guest.uuid, exc)

    def destroy(self, instance):
        guest = self._guests.pop(instance['uuid'], None)
        if guest is None:
            return
        with guest.lock:
            self._destroy_domain(guest)
            guest.remove()

    def _power_down(self, guest, timeout: float) -> None:
        found = self.live_domain(guest)
        if found is None:
            return
        try:
            found.shutdown()
        except libvirt.libvirtError:
            pass  # Gone already, or no ACPI yet: stopped hard below.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.live_domain(guest) is None:
                return
            time.sleep(POLL_INTERVAL)
        LOG.warning('Guest %(uuid)s did not shut down within %(timeout)s s: '
                    'stopping it hard', {'uuid': guest.uuid,
                                         'timeout': timeout})
        self._destroy_domain(guest)

    def power_off(self, instance):
        guest = self._guest(instance)
        with guest.lock:
            self._power_down(guest, self.conf.compute.shutdown_timeout)

    def power_on(self, instance, block_devices):
        guest = self._guest(instance)
        with guest.lock:
            if self.is_running(guest):
                return
            self._set_disks(guest, block_devices, _next_target(guest))
            self._give_user(guest)
            self._launch(guest)

    def get_power_state(self, instance):
        guest = self._guests.get(instance['uuid'])
        if guest is None:
            return states.POWER_NOSTATE
        return (states.POWER_RUNNING if self.is_running(guest)
                else states.POWER_SHUTDOWN)

    def _place(self, guest) -> dict:
        return {'target': domain.free_target(guest.disks.values())}

    def _plug(self, guest, disk) -> None:
        self._front(guest, disk)
        found = self.live_domain(guest)
        if found is not None:
            try:
                found.attachDeviceFlags(
                    domain.disk_xml(disk, self.conf.qemu.direct_io),
                    libvirt.VIR_DOMAIN_AFFECT_LIVE)
            except libvirt.libvirtError as exc:
                raise libvirtd.failed(
                    'attach volume %s' % disk['volume_id'], exc)

    def _detached(self, disk) -> None:
        if disk.get('front'):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(disk['front'])

    def _unplug(self, guest, disk) -> None:
        """Unplug, and wait until the guest released the disk; one that
        does not within ``[qemu] detach_timeout`` keeps it, and this
        raises."""
        found = self.live_domain(guest)
        if found is None:
            return
        action = 'detach volume %s' % disk['volume_id']
        try:
            found.detachDeviceFlags(
                domain.disk_xml(disk, self.conf.qemu.direct_io),
                libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            raise libvirtd.failed(action, exc)
        deadline = time.monotonic() + self.conf.qemu.detach_timeout
        while domain.live_disk(found.XMLDesc(0), disk['target']):
            if time.monotonic() > deadline:
                raise exception.DriverError(
                    action=action, reason='guest %s did not release it '
                    'within %s s' % (guest.uuid,
                                     self.conf.qemu.detach_timeout))
            time.sleep(POLL_INTERVAL)

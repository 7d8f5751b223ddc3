"""The QEMU driver: guests as QEMU processes that the agent starts and
watches over QMP.

This module is the guests' life (build, power, attach and detach); the
live migration is in ``overlay``, the legacy swap in ``swap``, and what a
guest's QEMU may do in ``confinement``.
"""

import functools
import os
import shutil
import threading

from oslo_log import log as logging

from volmig import states
from volmig.compute.drivers import base
from volmig.compute.drivers import guests
from volmig.compute.drivers import qemu_img
from volmig.compute.drivers.qemu import guest as guest_mod
from volmig.compute.drivers.qemu import monitor as qmp
from volmig.compute.drivers.qemu import overlay
from volmig.compute.drivers.qemu import swap

LOG = logging.getLogger(__name__)

# Seconds QEMU may take to exit after it reported SHUTDOWN.
SHUTDOWN_EXIT_TIMEOUT = 10


def _next_slot(disks: dict) -> dict:
    """A new disk's place: the next slot, the boot disk's the first."""
    return {'slot': len(disks), 'gen': 0}


class QemuDriver(overlay.OverlayMigration, swap.LegacySwap,
                 guests.GuestRecords, base.ComputeDriver):

    def __init__(self, conf):
        super().__init__(conf)
        self._loop: qmp.EventLoop | None = None

    @property
    def capabilities(self):
        return {base.LIVE_VOLUME_MIGRATION: True, base.MULTIATTACH: True,
                base.READONLY_ATTACH: True}

    # Agent start and stop.

    def _event_loop(self) -> qmp.EventLoop:
        if self._loop is None:
            self._loop = qmp.EventLoop()
        return self._loop

    def init_host(self, host):
        os.makedirs(self._guests_dir, exist_ok=True)
        for uuid in sorted(os.listdir(self._guests_dir)):
            guest = self._new_guest(uuid)
            try:
                guest.load()
            except FileNotFoundError:
                continue
            if guest.is_running():
                guest.connect()
                LOG.info('Reconnected to running guest %s', uuid)
            self._guests[uuid] = guest

    def cleanup_host(self):
        for guest in self._guests.values():
            guest.disconnect()
        if self._loop is not None:
            self._loop.stop()
            self._loop = None

    def stop_guests(self) -> None:
        """Shut every guest off, for the embedded default's exit."""
        for guest in self._guests.values():
            guest.shutdown()

    # Guests.

    def _new_guest(self, uuid: str) -> guest_mod.Guest:
        return guest_mod.Guest(self.conf, os.path.join(self._guests_dir,
                                                       uuid),
                               uuid, self._event_loop(),
                               functools.partial(self._guest_event, uuid))

    def _guest_event(self, uuid: str, name: str, data: dict) -> None:
        # A "quit" is the agent's own doing (destroy, hard stop, exit),
        # recorded by whoever sent it.
        if (name != 'SHUTDOWN' or self.power_listener is None
                or data.get('reason') == 'host-qmp-quit'):
            return
        guest = self._guests.get(uuid)
        if guest is None:
            return
        # QEMU exits right after SHUTDOWN; tell the agent once it has.
        threading.Thread(target=self._report_shutdown, args=(guest,),
                         name='shutdown-%s' % uuid, daemon=True).start()

    def _report_shutdown(self, guest) -> None:
        listener = self.power_listener
        if listener is None or not guest.gone_within(SHUTDOWN_EXIT_TIMEOUT):
            return
        try:
            listener(guest.uuid)
        except Exception:
            # The periodic sync records it later.
            LOG.exception('Recording that guest %s powered off failed',
                          guest.uuid)

    def spawn(self, instance, block_devices):
        guest = self._new_guest(instance['uuid'])
        with guest.lock:
            image = self._boot_image(guest, instance)
            self._set_disks(guest, block_devices, _next_slot)
            self._give_user(guest)
            self._guests[guest.uuid] = guest
            try:
                guest.launch(image)
            except Exception:
                guest.shutdown()
                raise

    def destroy(self, instance):
        guest = self._guests.pop(instance['uuid'], None)
        if guest is None:
            return
        with guest.lock:
            guest.shutdown()
            shutil.rmtree(guest.directory, ignore_errors=True)

    def power_off(self, instance):
        guest = self._guest(instance)
        with guest.lock:
            guest.power_down(self.conf.compute.shutdown_timeout)

    def power_on(self, instance, block_devices):
        guest = self._guest(instance)
        with guest.lock:
            if guest.is_running():
                return
            self._set_disks(guest, block_devices, _next_slot)
            self._give_user(guest)
            guest.launch(self._image(guest))

    def get_power_state(self, instance):
        guest = self._guests.get(instance['uuid'])
        if guest is None:
            return states.POWER_NOSTATE
        return (states.POWER_RUNNING if guest.is_running()
                else states.POWER_SHUTDOWN)

    def _place(self, guest) -> dict:
        return {'slot': guest.free_slot(), 'gen': 0}

    def _plug(self, guest, disk) -> None:
        if guest.is_running():
            guest.plug(disk)

    def _unplug(self, guest, disk) -> None:
        if guest.is_running():
            guest.unplug(disk)

    # qemu-img, for guests that are off.

    def _img(self, *args: str) -> None:
        qemu_img.run(self.conf, *args)

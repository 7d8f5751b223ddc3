"""Guests kept in memory: the control path without a data path."""

import dataclasses
import threading
import time

from volmig import exception
from volmig import states
from volmig.compute.drivers import base


@dataclasses.dataclass
class FakeDisk:
    attachment_id: str
    attach_mode: str
    connection_info: dict
    on_overlay: bool = False


@dataclasses.dataclass
class FakeGuest:
    power_state: str
    disks: dict = dataclasses.field(default_factory=dict)


class SimulatedCopy(base.Job):
    """Moves ``total`` bytes at an even rate over ``seconds``."""

    def __init__(self, seconds: float, total: int):
        self._began = time.monotonic()
        self._seconds = seconds
        self._total = total

    def poll(self) -> base.JobProgress:
        share = min(1.0, (time.monotonic() - self._began) / self._seconds)
        return base.JobProgress(int(self._total * share), self._total,
                                share >= 1.0)


class FakeDriver(base.ComputeDriver):

    def __init__(self, conf):
        super().__init__(conf)
        self._guests: dict[str, FakeGuest] = {}
        self._lock = threading.Lock()

    @property
    def capabilities(self):
        return {base.LIVE_VOLUME_MIGRATION:
                not self.conf.fake_driver.offline_only,
                base.MULTIATTACH: True,
                base.READONLY_ATTACH: True}

    def _guest(self, instance) -> FakeGuest:
        try:
            return self._guests[instance['uuid']]
        except KeyError:
            raise exception.InstanceNotFound(instance_uuid=instance['uuid'])

    def _disk(self, instance, bdm) -> FakeDisk:
        return self._guest(instance).disks[bdm['volume_id']]

    @staticmethod
    def _new_disk(bdm) -> FakeDisk:
        return FakeDisk(bdm['attachment_id'], bdm['attach_mode'],
                        bdm['connection_info'])

    def spawn(self, instance, block_devices):
        with self._lock:
            self._guests[instance['uuid']] = FakeGuest(
                states.POWER_RUNNING,
                {bdm['volume_id']: self._new_disk(bdm)
                 for bdm in block_devices})

    def destroy(self, instance):
        with self._lock:
            self._guests.pop(instance['uuid'], None)

    def power_off(self, instance):
        self._guest(instance).power_state = states.POWER_SHUTDOWN

    def power_on(self, instance, block_devices):
        self._guest(instance).power_state = states.POWER_RUNNING

    def get_power_state(self, instance):
        guest = self._guests.get(instance['uuid'])
        return guest.power_state if guest else states.POWER_NOSTATE

    def attach_volume(self, instance, bdm):
        self._guest(instance).disks[bdm['volume_id']] = self._new_disk(bdm)

    def detach_volume(self, instance, bdm):
        self._guest(instance).disks.pop(bdm['volume_id'], None)

    def swap_volume(self, instance, old_bdm, new_bdm):
        disks = self._guest(instance).disks
        disks[new_bdm['volume_id']] = self._new_disk(new_bdm)
        del disks[old_bdm['volume_id']]
        return base.FinishedJob()

    def migration_start(self, instance, bdm, migration):
        if migration['mode'] == states.MODE_OFFLINE:
            if self.get_power_state(instance) == states.POWER_RUNNING:
                raise exception.InstanceMustBeShutOff(
                    host=migration['host'], instance_uuid=instance['uuid'])
            return {}
        self._disk(instance, bdm).on_overlay = True
        return {}

    def _job(self) -> base.Job:
        seconds = self.conf.fake_driver.job_seconds
        if not seconds:
            return base.FinishedJob()
        return SimulatedCopy(seconds, self.conf.fake_driver.job_bytes)

    def migration_cancel(self, instance, bdm, migration):
        self._disk(instance, bdm).on_overlay = False
        return self._job()

    def migration_switch(self, instance, bdm, migration,
                         dst_connection_info):
        disk = self._disk(instance, bdm)
        disk.attachment_id = migration['dst_attachment_id']
        disk.connection_info = dst_connection_info
        return {}

    def migration_commit(self, instance, bdm, migration):
        self._disk(instance, bdm).on_overlay = False
        return self._job()

    def migration_recover(self, instance, bdm, migration,
                          dst_connection_info):
        disk = self._disk(instance, bdm)
        on_dst = (dst_connection_info is not None
                  and disk.connection_info == dst_connection_info)
        return 'dst' if on_dst else 'src'

    def guest_disk(self, instance_uuid: str, volume_id: str) -> FakeDisk:
        """What the guest is using now; for tests and the demo."""
        return self._guests[instance_uuid].disks[volume_id]

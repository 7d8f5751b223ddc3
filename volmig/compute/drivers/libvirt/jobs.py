"""The libvirt block jobs the agent polls; each ends in a pivot.

Each pivot is journaled first, as the qemu driver journals its QMP steps,
so an agent that restarts knows what it was about to do.
"""

import time
import typing

import libvirt
from oslo_log import log as logging

from volmig import exception
from volmig.compute.drivers import base
from volmig.compute.drivers import journal as journal_mod
from volmig.compute.drivers.libvirt import domain
from volmig.compute.drivers.libvirt import restarts

if typing.TYPE_CHECKING:
    from volmig.compute.drivers.libvirt import driver as driver_mod

LOG = logging.getLogger(__name__)


def pivot(found, target: str,
          before: typing.Callable[[], object] = lambda: None
          ) -> float | None:
    """Pivot a ready block job; its pause in ms, or None if it is not
    ready yet. ``before`` runs just before the pivot."""
    info = found.blockJobInfo(target, 0)
    if not info or info['cur'] != info['end']:
        return None
    before()
    began = time.monotonic()
    try:
        found.blockJobAbort(target, libvirt.VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_BLOCK_COPY_ACTIVE:
            return None  # Caught up, but not ready yet.
        raise
    return (time.monotonic() - began) * 1000


class PivotJob(base.Job):
    """A libvirt block job of one disk, whose end is its pivot."""

    def __init__(self, driver: 'driver_mod.LibvirtDriver',
                 guest: domain.Guest, disk: dict, action: str, key: str):
        self._driver = driver
        self._guest = guest
        self._disk = disk
        self._action = action
        # The job's name in the journal.
        self._key = key
        self.pauses: dict[str, float] = {}
        self._last = base.JobProgress(0, 1, False)

    def done(self, found) -> bool:
        """Whether the job ended before this poll."""
        return False

    def before_pivot(self) -> None:
        """Journal the pivot about to happen."""

    def pivoted(self, pause: float) -> None:
        """The disk is on the job's target now."""

    def poll(self) -> base.JobProgress:
        connections = self._driver.connections
        try:
            self._last = self._poll()
        except (libvirt.libvirtError, exception.DriverError):
            if not restarts.went_away(self._driver, connections):
                raise  # libvirtd was there all along: a real failure.
            # libvirtd died, or restarted since this poll began: QEMU runs
            # the job on, and a new libvirtd finds it again.
            LOG.warning('%s: libvirtd went away; asking again',
                        self._action)
        return self._last

    def _poll(self) -> base.JobProgress:
        guest, disk = self._guest, self._disk
        with guest.lock:
            found = self._driver.live_domain(guest)
            if found is None:
                raise exception.DriverError(action=self._action,
                                            reason='the guest stopped')
            if self.done(found):
                return base.JobProgress(0, 0, True)
            info = found.blockJobInfo(disk['target'], 0)
            if not info:
                raise exception.DriverError(action=self._action,
                                            reason='libvirt has no job')
            try:
                pause = pivot(found, disk['target'], self.before_pivot)
            except libvirt.libvirtError as exc:
                raise exception.DriverError(action=self._action,
                                            reason=exc.get_error_message())
            if pause is None:
                return base.JobProgress(info['cur'], info['end'], False)
            self.pivoted(pause)
            return base.JobProgress(info['end'], info['end'], True)


class CommitJob(PivotJob):
    """An active block commit of a disk's overlay into its backing."""

    def __init__(self, driver: 'driver_mod.LibvirtDriver',
                 guest: domain.Guest, disk: dict, migration_id: str):
        super().__init__(driver, guest, disk, 'commit the overlay of '
                         'volume %s' % disk['volume_id'], migration_id)

    def done(self, found) -> bool:
        live = domain.live_disk(found.XMLDesc(0), self._disk['target'])
        if live and live['backing'] is None:
            # Pivoted: by this job, or by one before an agent restart.
            self._driver.drop_overlay(self._guest, self._disk, self._key)
            return True
        return False

    def before_pivot(self) -> None:
        self._driver.journal.record(self._key, 'job_complete')

    def pivoted(self, pause: float) -> None:
        self.pauses['complete'] = pause
        self._driver.drop_overlay(self._guest, self._disk, self._key)


class SwapJob(PivotJob):
    """The legacy swap: a full block copy onto the new volume."""

    def __init__(self, driver: 'driver_mod.LibvirtDriver',
                 guest: domain.Guest, disk: dict, new_bdm: dict,
                 new_path: str):
        super().__init__(driver, guest, disk,
                         'swap volume %s' % disk['volume_id'],
                         journal_mod.swap_key(new_bdm))
        self._new_bdm = new_bdm
        self._new_path = new_path

    def before_pivot(self) -> None:
        self._driver.journal.record(self._key, 'pivot')

    def pivoted(self, pause: float) -> None:
        self.pauses['pivot'] = pause
        # Before the record changes: a guest that stops now is known to
        # be on the new volume.
        self._driver.journal.record(self._key, 'release_old')
        self._driver.repoint(self._guest, self._disk, self._new_bdm,
                             self._new_path)
        self._driver.journal.close(self._key)

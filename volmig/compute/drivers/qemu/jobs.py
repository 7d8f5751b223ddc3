"""The QEMU block jobs the agent polls: a commit and a mirror."""

import typing

from volmig import exception
from volmig.compute.drivers import base
from volmig.compute.drivers import journal
from volmig.compute.drivers.qemu import disks
from volmig.compute.drivers.qemu import guest as guest_mod

if typing.TYPE_CHECKING:
    from volmig.compute.drivers.qemu import overlay
    from volmig.compute.drivers.qemu import swap


def commit_job_id(migration_id: str) -> str:
    return 'commit-%s' % migration_id


def find_job(guest: guest_mod.Guest, job_id: str) -> dict | None:
    for job in guest.execute('query-jobs'):
        if job['id'] == job_id:
            return job
    return None


class CommitJob(base.Job):
    """An active block-commit of a disk's overlay into its base."""

    def __init__(self, driver: 'overlay.OverlayMigration',
                 guest: guest_mod.Guest, volume_id: str, migration_id: str):
        self._driver = driver
        self._guest = guest
        self._volume_id = volume_id
        self._migration_id = migration_id
        self.job_id = commit_job_id(migration_id)
        self.pauses: dict[str, float] = {}
        self.completing = False

    def poll(self) -> base.JobProgress:
        guest = self._guest
        journal = self._driver.journal
        with guest.lock:
            disk = guest.disks[self._volume_id]
            job = find_job(guest, self.job_id)
            if job is None:
                raise exception.DriverError(
                    action='commit the overlay of volume %s'
                    % self._volume_id,
                    reason='QEMU has no job %s' % self.job_id)
            done, total = job['current-progress'], job['total-progress']
            # Once: QEMU shows the job ready for a while after it took the
            # complete, and refuses a second one once it has concluded.
            if job['status'] == 'ready' and not self.completing:
                self.completing = True
                journal.record(self._migration_id, 'job_complete')
                # The last writes drain here: the pause of the switch-over.
                self.pauses['complete'] = guest.timed('job-complete',
                                                      id=self.job_id)
            elif job['status'] == 'concluded':
                guest.execute('job-dismiss', id=self.job_id)
                if job.get('error'):
                    raise exception.DriverError(action='commit the overlay',
                                                reason=job['error'])
                self._driver.drop_overlay(guest, disk, self._migration_id)
                return base.JobProgress(total, total, True)
            return base.JobProgress(done, total, False)


class MirrorJob(base.Job):
    """A blockdev-mirror of a disk into a new volume, then the pivot."""

    def __init__(self, driver: 'swap.LegacySwap',
                 guest: guest_mod.Guest, disk: dict, new_bdm: dict,
                 new_path: str):
        self._driver = driver
        self._guest = guest
        self._disk = disk
        self._new_bdm = new_bdm
        self._new_path = new_path
        self.job_id = 'mirror-%s' % new_bdm['attachment_id']
        self.pauses: dict[str, float] = {}
        self.completing = False

    def poll(self) -> base.JobProgress:
        guest, disk = self._guest, self._disk
        old = disks.node_names(disk)
        new = disks.node_names(dict(disk, gen=disk['gen'] + 1))
        with guest.lock:
            job = find_job(guest, self.job_id)
            if job is None:
                raise exception.DriverError(
                    action='mirror the volume',
                    reason='QEMU has no job %s' % self.job_id)
            done, total = job['current-progress'], job['total-progress']
            key = journal.swap_key(self._new_bdm)
            if job['status'] == 'ready' and not self.completing:
                # Once, as a commit's complete.
                self.completing = True
                self._driver.journal.record(key, 'pivot')
                # The pivot: the device and its export move to the copy.
                self.pauses['pivot'] = guest.timed('job-complete',
                                                   id=self.job_id)
            elif job['status'] == 'concluded':
                guest.execute('job-dismiss', id=self.job_id)
                if job.get('error'):
                    guest.delete_nodes(new['base'])
                    self._driver.journal.close(key)
                    raise exception.DriverError(action='mirror the volume',
                                                reason=job['error'])
                self._driver.journal.record(key, 'release_old')
                guest.delete_nodes(old['base'])
                disk['gen'] += 1
                self._driver.repoint(guest, disk, self._new_bdm,
                                     self._new_path)
                self._driver.journal.close(key)
                return base.JobProgress(total, total, True)
            return base.JobProgress(done, total, False)

"""The legacy swap: QEMU copies, as Nova's swap-volume does.

A ``blockdev-mirror`` from src to dst, pivoting when ready; a guest that
is off is copied with qemu-img. Kept as the baseline the overlay
migration is measured against.
"""

import typing

from volmig import exception
from volmig.compute.drivers import base
from volmig.compute.drivers import journal as journal_mod
from volmig.compute.drivers.qemu import guest as guest_mod
from volmig.compute.drivers.qemu import jobs
from volmig.compute.drivers.qemu import settle

if typing.TYPE_CHECKING:
    from volmig.compute import volumes as volumes_mod


class LegacySwap:
    """The driver's swap methods; mixed into QemuDriver."""

    if typing.TYPE_CHECKING:
        # What QemuDriver, the class these methods are mixed into, has.
        journal: journal_mod.Journal
        volumes: volumes_mod.VolumeConnector

        def _guest(self, instance) -> guest_mod.Guest: ...

        def _img(self, *args: str) -> None: ...

        def repoint(self, guest, disk, new_bdm, path: str) -> None: ...

        @staticmethod
        def _swappable(guest, old_bdm) -> dict: ...


    def swap_volume(self, instance, old_bdm, new_bdm):
        guest = self._guest(instance)
        new_path = self.volumes.path(new_bdm['connection_info'])
        with guest.lock:
            disk = self._swappable(guest, old_bdm)
            key = journal_mod.swap_key(new_bdm)
            self.journal.record(key, 'mirror', action='swap',
                                instance_uuid=guest.uuid, old_bdm=old_bdm,
                                new_bdm=new_bdm)
            if not guest.is_running():
                self._img('convert', '-n', '-f', 'raw', '-O', 'raw',
                          disk['path'], new_path)
                self.repoint(guest, disk, new_bdm, new_path)
                self.journal.close(key)
                return base.FinishedJob()
            names = guest_mod.node_names(disk)
            target = guest_mod.node_names(dict(disk, gen=disk['gen'] + 1))
            guest.add_volume_node(target['base'], new_path, read_only=False)
            job = jobs.MirrorJob(self, guest, disk, new_bdm, new_path)
            try:
                guest.execute('blockdev-mirror', **{
                    'job-id': job.job_id, 'device': names['base'],
                    'target': target['base'], 'sync': 'full',
                    'auto-dismiss': False})
            except Exception:
                guest.delete_nodes(target['base'])
                self.journal.close(key)
                raise
            return job

    def swap_recover(self, entry: dict) -> base.Job:
        """Settle a swap an agent crash cut short.

        The guest is on the new volume once the mirror pivoted: then the
        job finishes the swap. Before that, a mirror QEMU still runs is
        resumed; one that is gone leaves the guest on the old volume, and
        this raises.
        """
        old_bdm, new_bdm = entry['old_bdm'], entry['new_bdm']
        new_path = self.volumes.path(new_bdm['connection_info'])
        key = journal_mod.swap_key(new_bdm)
        guest = self._guest({'uuid': entry['instance_uuid']})
        with guest.lock:
            disk = (guest.disks.get(old_bdm['volume_id'])
                    or guest.disks.get(new_bdm['volume_id']))
            if disk is None or disk['volume_id'] == new_bdm['volume_id']:
                self.journal.close(key)
                return base.FinishedJob()
            job = jobs.MirrorJob(self, guest, disk, new_bdm, new_path)
            if guest.is_running():
                if jobs.find_job(guest, job.job_id) is not None:
                    return job
                settle.settle(guest, disk)
            elif entry['step'] == 'release_old':
                # The pivot is behind it; the record was not updated yet.
                disk.update(path=new_path, gen=disk['gen'] + 1)
            if disk['path'] == new_path:
                self.repoint(guest, disk, new_bdm, new_path)
                self.journal.close(key)
                return base.FinishedJob()
            self.journal.close(key)
            raise exception.DriverError(
                action='swap volume %s' % old_bdm['volume_id'],
                reason='the agent stopped before the copy was done; the '
                'guest stays on the old volume')

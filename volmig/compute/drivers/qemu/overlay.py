"""Live volume migration on a QEMU guest, with a local overlay: QEMU's
part of each step (``volmig.compute.drivers.steps`` keeps their order).

The QMP sequence is in doc/source/design.rst, "Compute drivers". Start
snapshots the volume's node into a host-local qcow2 overlay, so src gets
no more writes. Complete opens dst, reopens the overlay onto it, closes
src, and commits the overlay into dst as a tracked job. Cancel commits the
overlay back into src.

A read-only disk gets no overlay at start: nothing can write to it, so
src is frozen already. On complete it gets an empty read-only overlay
(a shim) only so that its backing can be switched to dst; the shim is
dropped when the guest next starts.
"""

import contextlib
import os

from volmig import exception
from volmig.compute.drivers import steps
from volmig.compute.drivers.qemu import confinement
from volmig.compute.drivers.qemu import disks
from volmig.compute.drivers.qemu import jobs
from volmig.compute.drivers.qemu import settle


class OverlayMigration(steps.MigrationSteps):
    """QEMU's part of a migration's steps; mixed into QemuDriver."""

    def _live(self, guest, disk):
        return guest if guest.is_running() else None

    def _overlay_path(self, guest, migration_id: str) -> str:
        return guest.path('overlay-%s.qcow2' % migration_id)

    def _snapshot(self, guest, live, disk, migration_id: str,
                  read_only: bool = False) -> float:
        """Put a new overlay on top of the disk's node; returns the pause."""
        path = self._overlay_path(guest, migration_id)
        overlay = {'path': path, 'gen': disk['gen'], 'sealed': read_only}
        names = disks.node_names(dict(disk, overlay=overlay))
        try:
            self._img('create', '-q', '-f', 'qcow2', '-b', disk['path'],
                      '-F', 'raw', path)
            os.chmod(path, steps.OVERLAY_MODE)
            guest.add_overlay_node(names['overlay'], path, backing=None,
                                   read_only=read_only)
            pause = guest.timed('blockdev-snapshot', node=names['base'],
                                overlay=names['overlay'])
        except Exception:
            self._undo_snapshot(guest, names['overlay'], path)
            raise
        disk['overlay'] = overlay
        guest.save()
        return pause

    @staticmethod
    def _undo_snapshot(guest, node: str, path: str) -> None:
        """Undo a snapshot that did not happen."""
        for name in (node, node + 'f'):
            try:
                guest.execute('blockdev-del', **{'node-name': name})
            except exception.DriverError:
                pass
        with contextlib.suppress(exception.DriverError):
            confinement.release_files(guest)
        if os.path.exists(path):
            os.unlink(path)

    @staticmethod
    def _overlay_file(disk) -> str:
        return disk['overlay']['path']

    @staticmethod
    def _holds_writes(disk) -> bool:
        # A read-only shim holds none.
        return bool(disk.get('overlay')) and not disk['overlay']['sealed']

    def _switch_live(self, guest, live, disk, migration,
                     dst_path: str) -> dict:
        migration_id = migration['id']
        read_only = disk['attach_mode'] == 'ro'
        if not disk.get('overlay'):
            self._snapshot(guest, live, disk, migration_id, read_only=True)

        old = disks.node_names(disk)
        new = disks.node_names(dict(disk, gen=disk['gen'] + 1))
        guest.add_volume_node(new['base'], dst_path, read_only)
        self.journal.record(migration_id, 'reopen')
        try:
            pause = guest.timed('blockdev-reopen', options=[{
                'driver': 'qcow2', 'node-name': old['overlay'],
                'file': old['overlay_file'], 'backing': new['base'],
                'read-only': read_only}])
        except Exception:
            guest.delete_nodes(new['base'])
            raise
        if not read_only:
            guest.execute('change-backing-file', device=old['overlay'],
                          **{'image-node-name': old['overlay'],
                             'backing-file': dst_path})
        self.journal.record(migration_id, 'release_src')
        guest.delete_nodes(old['base'])
        disk['gen'] += 1
        return {'switch': pause}

    def _commit(self, guest, live, disk,
                migration_id: str) -> jobs.CommitJob:
        names = disks.node_names(disk)
        job = jobs.CommitJob(self, guest, disk['volume_id'], migration_id)
        if jobs.find_job(guest, job.job_id) is None:
            guest.execute('block-commit', **{
                'job-id': job.job_id, 'device': names['overlay'],
                'base-node': names['base'], 'auto-dismiss': False})
        return job

    def _close_overlay(self, guest, disk) -> None:
        guest.delete_nodes(disks.node_names(disk)['overlay'])

    def _settle(self, guest, disk, migration_id: str) -> None:
        """A running guest's disk is rebuilt from QEMU's block graph. For
        a guest that is down, an overlay the crash kept off the record
        (the snapshot was taken, the record not saved) is taken back into
        it, so its writes get merged."""
        path = self._overlay_path(guest, migration_id)
        if guest.is_running():
            settle.settle(guest, disk)
            if not disk.get('overlay') and os.path.exists(path):
                # Created, never put on top: it holds no writes.
                os.unlink(path)
        elif not disk.get('overlay') and os.path.exists(path):
            disk['overlay'] = {'path': path, 'gen': disk['gen'],
                               'sealed': False}
            guest.save()

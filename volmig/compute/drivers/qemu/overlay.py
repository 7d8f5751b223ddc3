"""Live volume migration on a QEMU guest, with a local overlay.

The QMP sequence is in doc/source/design.rst, "Compute drivers". Start
snapshots the volume's node into a host-local qcow2 overlay, so src gets
no more writes. Complete opens dst, reopens the overlay onto it, closes
src, and commits the overlay into dst as a tracked job. Cancel commits the
overlay back into src. Each step is written to the job journal first.

A read-only disk gets no overlay at start: nothing can write to it, so
src is frozen already. On complete it gets an empty read-only overlay
(a shim) only so that its backing can be switched to dst; the shim is
dropped when the guest next starts.
"""

import contextlib
import os
import typing

from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute.drivers import base
from volmig.compute.drivers import guests
from volmig.compute.drivers.qemu import confinement
from volmig.compute.drivers.qemu import guest as guest_mod
from volmig.compute.drivers.qemu import jobs
from volmig.compute.drivers.qemu import settle

if typing.TYPE_CHECKING:
    from volmig.compute.drivers import journal as journal_mod

LOG = logging.getLogger(__name__)
OVERLAY_MODE = 0o600


class OverlayMigration:
    """The driver's migration_* methods; mixed into QemuDriver, whose
    guests, journal, volumes and qemu-img they use."""

    if typing.TYPE_CHECKING:
        # What QemuDriver, the class these methods are mixed into, has.
        journal: journal_mod.Journal

        def _guest(self, instance) -> guest_mod.Guest: ...

        @staticmethod
        def _offline(guest, running: bool, migration) -> bool: ...

        def _img(self, *args: str) -> None: ...

        def repoint(self, guest, disk, new_bdm, path: str) -> None: ...


    def _live_disk(self, instance, bdm):
        guest = self._guest(instance)
        return guest, guest.disks[bdm['volume_id']]

    def migration_start(self, instance, bdm, migration):
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            if self._offline(guest, guest.is_running(), migration):
                return {}
            if disk['attach_mode'] == 'ro' or disk.get('overlay'):
                # Read-only: src is frozen already. Overlay: a repeat.
                return {}
            self.journal.record(migration['id'], 'snapshot', action='start',
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            try:
                pause = self._snapshot(guest, disk, migration['id'],
                                       read_only=False)
            finally:
                # Undone or done: nothing is left to reconcile.
                self.journal.close(migration['id'])
            return {'start': pause}

    def _overlay_path(self, guest, migration_id: str) -> str:
        return guest.path('overlay-%s.qcow2' % migration_id)

    def _snapshot(self, guest, disk, migration_id: str,
                  read_only: bool) -> float:
        """Put a new overlay on top of the disk's node; returns the pause."""
        path = self._overlay_path(guest, migration_id)
        overlay = {'path': path, 'gen': disk['gen'], 'sealed': read_only}
        names = guest_mod.node_names(dict(disk, overlay=overlay))
        try:
            self._img('create', '-q', '-f', 'qcow2', '-b', disk['path'],
                      '-F', 'raw', path)
            # The guest's writes, until committed: the agent's alone.
            os.chmod(path, OVERLAY_MODE)
            guest.add_overlay_node(names['overlay'], path, backing=None,
                                   read_only=read_only)
            pause = guest.timed('blockdev-snapshot', node=names['base'],
                                overlay=names['overlay'])
        except Exception:
            self._forget_overlay(guest, names['overlay'], path)
            raise
        disk['overlay'] = overlay
        guest.save()
        return pause

    @staticmethod
    def _forget_overlay(guest, node: str, path: str) -> None:
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
    def _overlay_to_merge(disk) -> dict | None:
        """The overlay holding guest writes; a read-only shim holds none."""
        overlay = disk.get('overlay')
        return overlay if overlay and not overlay['sealed'] else None

    def migration_cancel(self, instance, bdm, migration):
        return self._merge(instance, bdm, migration, 'cancel')

    def _merge(self, instance, bdm, migration, action: str) -> base.Job:
        """Commit the overlay into its backing: src on cancel, dst on
        complete (the switch made dst its backing)."""
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            if self._overlay_to_merge(disk) is None:
                self.journal.close(migration['id'])
                return base.FinishedJob()
            if not guest.is_running():
                self._merge_on_disk(guest, disk, migration['id'])
                return base.FinishedJob()
            self.journal.record(migration['id'], 'commit', action=action,
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            return self._commit(guest, disk, migration['id'])

    def migration_switch(self, instance, bdm, migration,
                         dst_connection_info):
        guest, disk = self._live_disk(instance, bdm)
        dst_path = self.volumes.path(dst_connection_info)
        with guest.lock:
            if disk['path'] == dst_path:
                # A repeat, after an agent restart: switched already.
                return {}
            guests.check_dst(disk, dst_path, migration['id'])
            self.journal.record(migration['id'], 'switch',
                                action='complete', instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'], dst=dst_path)
            figures = {}
            if migration['mode'] == states.MODE_LIVE and guest.is_running():
                figures = self._switch_live(guest, disk, migration['id'],
                                            dst_path)
            elif disk.get('overlay'):
                # The guest went down after a live start. dst is src as it
                # stood at start, so the overlay's writes go on top of it.
                self._merge_on_disk(guest, disk, migration['id'], dst_path)
            disk.update(path=dst_path,
                        attachment_id=migration['dst_attachment_id'])
            guest.save()
            self.journal.close(migration['id'])
            return figures

    def _switch_live(self, guest, disk, migration_id: str,
                     dst_path: str) -> dict:
        read_only = disk['attach_mode'] == 'ro'
        if not disk.get('overlay'):
            self._snapshot(guest, disk, migration_id, read_only=True)
        old = guest_mod.node_names(disk)
        new = guest_mod.node_names(dict(disk, gen=disk['gen'] + 1))
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

    def migration_commit(self, instance, bdm, migration):
        return self._merge(instance, bdm, migration, 'complete')

    def _commit(self, guest, disk,
                migration_id: str) -> jobs.CommitJob:
        """The commit job, started unless QEMU runs it already."""
        names = guest_mod.node_names(disk)
        job = jobs.CommitJob(self, guest, disk['volume_id'], migration_id)
        if jobs.find_job(guest, job.job_id) is None:
            guest.execute('block-commit', **{
                'job-id': job.job_id, 'device': names['overlay'],
                'base-node': names['base'], 'auto-dismiss': False})
        return job

    def _merge_on_disk(self, guest, disk, migration_id: str,
                       base_path: str | None = None) -> None:
        """QEMU is gone: merge the overlay into ``base_path`` with qemu-img.

        The base is named, not read from the overlay's header, which says
        dst from the switch on. A journal at ``drop_overlay`` means QEMU
        had merged the overlay and sent later writes to the base: merging
        the stale overlay again would undo them; so the merge records no
        step of its own. Re-running a merge that was cut short is
        harmless: the guest is down, nothing changes.
        """
        base_path = base_path or disk['path']
        overlay = disk['overlay']['path']
        entry = self.journal.get(migration_id) or {}
        if entry.get('step') != 'drop_overlay':
            LOG.warning('Guest %(guest)s is down: merging overlay %(ovl)s '
                        'into %(base)s on disk', {'guest': guest.uuid,
                                                  'ovl': overlay,
                                                  'base': base_path})
            self._img('rebase', '-q', '-u', '-f', 'qcow2', '-b', base_path,
                      '-F', 'raw', overlay)
            self._img('commit', '-q', '-f', 'qcow2', overlay)
        self.drop_overlay_file(guest, disk)
        self.journal.close(migration_id)

    def drop_overlay_file(self, guest, disk) -> None:
        if os.path.exists(disk['overlay']['path']):
            os.unlink(disk['overlay']['path'])
        disk['overlay'] = None
        guest.save()

    def drop_overlay(self, guest, disk, migration_id: str) -> None:
        """After a finished commit: close the overlay and delete it."""
        self.journal.record(migration_id, 'drop_overlay')
        names = guest_mod.node_names(disk)
        guest.delete_nodes(names['overlay'])
        self.drop_overlay_file(guest, disk)
        self.journal.close(migration_id)

    # Recovery.

    def migration_recover(self, instance, bdm, migration,
                          dst_connection_info):
        """Make the record agree with QEMU after an agent crash.

        A running guest's disk is rebuilt from QEMU's block graph. For a
        guest that is down, an overlay the crash kept off the record (the
        snapshot was taken, the record not saved) is taken back into it,
        so its writes get merged. Returns the side the guest is on.
        """
        guest, disk = self._live_disk(instance, bdm)
        self.journal.announce(migration['id'])
        with guest.lock:
            path = self._overlay_path(guest, migration['id'])
            if guest.is_running():
                settle.settle(guest, disk)
                if not disk.get('overlay') and os.path.exists(path):
                    # Created, never put on top: it holds no writes.
                    os.unlink(path)
            elif not disk.get('overlay') and os.path.exists(path):
                disk['overlay'] = {'path': path, 'gen': disk['gen'],
                                   'sealed': False}
                guest.save()
            if dst_connection_info and disk['path'] == self.volumes.path(
                    dst_connection_info):
                return 'dst'
            return 'src'

"""The order of a migration's and a legacy swap's steps on a guest's disk,
written once for every driver.

Each step that changes where a disk is runs in the order that survives a
crash at any point: record the step in the job journal, ask the
hypervisor, update the disk's record, save it, close the journal. An
agent that restarts between two of these reads the journal and the
hypervisor, and takes the step again or settles it (``migration_recover``,
``swap_recover``). The drivers supply only the hypervisor's part: QEMU's
block graph over QMP, or libvirt's snapshots and block jobs.
"""

import contextlib
import os
import typing

from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute.drivers import base
from volmig.compute.drivers import guests
from volmig.compute.drivers import journal as journal_mod

LOG = logging.getLogger(__name__)

# An overlay holds a guest's writes until they are committed: the agent's
# alone.
OVERLAY_MODE = 0o600


class Steps:
    """What both step orders ask of the driver they are mixed into."""

    if typing.TYPE_CHECKING:
        journal: journal_mod.Journal
        volumes: typing.Any

        def _guest(self, instance) -> typing.Any: ...

        def _img(self, *args: str) -> None: ...

    def _live(self, guest, disk) -> typing.Any:
        """The hypervisor's handle on the running guest, with the disk's
        record made to agree with it; None when the guest is down."""
        raise NotImplementedError

    def _live_disk(self, instance, bdm):
        guest = self._guest(instance)
        return guest, guest.disks[bdm['volume_id']]


class MigrationSteps(Steps):
    """start, switch, commit, cancel and recover of a live migration."""

    if typing.TYPE_CHECKING:
        @staticmethod
        def _offline(guest, running: bool, migration) -> bool: ...

    # The hypervisor's part, each driver's own.

    def _snapshot(self, guest, live, disk, migration_id: str) -> float:
        """Put a new overlay on top of the disk; returns the pause."""
        raise NotImplementedError

    def _switch_live(self, guest, live, disk, migration,
                     dst_path: str) -> dict:
        """Put the running guest's overlay onto dst; returns figures."""
        raise NotImplementedError

    def _commit(self, guest, live, disk, migration_id: str) -> base.Job:
        """The job committing the overlay into its backing, started
        unless the hypervisor runs it already."""
        raise NotImplementedError

    def _close_overlay(self, guest, disk) -> None:
        """Let go of a committed overlay in the running hypervisor."""

    @staticmethod
    def _overlay_file(disk) -> str:
        """The path of the overlay on top of the disk (it has one)."""
        raise NotImplementedError

    @staticmethod
    def _holds_writes(disk) -> bool:
        """Whether the disk's overlay holds the guest's writes."""
        return bool(disk.get('overlay'))

    def _settle(self, guest, disk, migration_id: str) -> None:
        """Make the disk's record agree with the hypervisor after a crash,
        and drop what the crash left behind."""
        raise NotImplementedError

    # The order, the same on every driver.

    def migration_start(self, instance, bdm, migration):
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            live = self._live(guest, disk)
            if self._offline(guest, live is not None, migration):
                return {}
            if disk['attach_mode'] == 'ro' or disk.get('overlay'):
                # Read-only: src is frozen already. Overlay: a repeat.
                return {}
            self.journal.record(migration['id'], 'snapshot', action='start',
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            try:
                pause = self._snapshot(guest, live, disk, migration['id'])
            finally:
                # Undone or done: nothing is left to reconcile.
                self.journal.close(migration['id'])
            return {'start': pause}

    def migration_switch(self, instance, bdm, migration,
                         dst_connection_info):
        guest, disk = self._live_disk(instance, bdm)
        dst_path = self.volumes.path(dst_connection_info)
        with guest.lock:
            live = self._live(guest, disk)
            if disk['path'] == dst_path:
                return {}  # A repeat: switched already.
            guests.check_dst(disk, dst_path, migration['id'])
            self.journal.record(migration['id'], 'switch',
                                action='complete', instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'], dst=dst_path)
            figures = {}
            if migration['mode'] == states.MODE_LIVE and live is not None:
                figures = self._switch_live(guest, live, disk, migration,
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

    def migration_commit(self, instance, bdm, migration):
        return self._merge(instance, bdm, migration['id'], 'complete')

    def migration_cancel(self, instance, bdm, migration):
        return self._merge(instance, bdm, migration['id'], 'cancel')

    def _merge(self, instance, bdm, migration_id: str,
               action: str) -> base.Job:
        """Commit the overlay into its backing: src on cancel, dst on
        complete (the switch made dst its backing)."""
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            live = self._live(guest, disk)
            if not self._holds_writes(disk):
                self.journal.close(migration_id)
                return base.FinishedJob()
            if live is None:
                self._merge_on_disk(guest, disk, migration_id, disk['path'])
                return base.FinishedJob()
            self.journal.record(migration_id, 'commit', action=action,
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            return self._commit(guest, live, disk, migration_id)

    def _merge_on_disk(self, guest, disk, migration_id: str,
                       base_path: str) -> None:
        """The guest is down: merge its overlay into ``base_path`` with
        qemu-img.

        The base is named, not read from the overlay's header, which says
        dst from the switch on. A journal at ``drop_overlay`` means the
        overlay was merged and later writes went to the base: merging the
        stale overlay again would undo them. A merge cut short is taken
        again whole: the guest is down, nothing else changes the files.
        """
        overlay = self._overlay_file(disk)
        entry = self.journal.get(migration_id) or {}
        if entry.get('step') != 'drop_overlay':
            LOG.warning('Guest %(guest)s is down: merging overlay %(ovl)s '
                        'into %(base)s on disk', {'guest': guest.uuid,
                                                  'ovl': overlay,
                                                  'base': base_path})
            self._img('rebase', '-q', '-u', '-f', 'qcow2', '-b', base_path,
                      '-F', 'raw', overlay)
            self._img('commit', '-q', '-f', 'qcow2', overlay)
            self.journal.record(migration_id, 'drop_overlay')
        self._forget_overlay(guest, disk, migration_id)

    def drop_overlay(self, guest, disk, migration_id: str) -> None:
        """After a finished commit: close the overlay and delete it."""
        self.journal.record(migration_id, 'drop_overlay')
        self._close_overlay(guest, disk)
        self._forget_overlay(guest, disk, migration_id)

    def _forget_overlay(self, guest, disk, migration_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._overlay_file(disk))
        disk['overlay'] = None
        guest.save()
        self.journal.close(migration_id)

    def migration_recover(self, instance, bdm, migration,
                          dst_connection_info):
        """Make the record agree with the hypervisor after an agent crash;
        returns the side the guest is on."""
        guest, disk = self._live_disk(instance, bdm)
        self.journal.announce(migration['id'])
        with guest.lock:
            self._settle(guest, disk, migration['id'])
            if dst_connection_info and disk['path'] == self.volumes.path(
                    dst_connection_info):
                return 'dst'
            return 'src'


class SwapSteps(Steps):
    """The legacy swap: the hypervisor copies the whole volume onto the
    new one and pivots, as Nova's swap-volume does; a guest that is off
    is copied with qemu-img. Kept as the baseline the live migration is
    measured against."""

    if typing.TYPE_CHECKING:
        def repoint(self, guest, disk, new_bdm, path: str) -> None: ...

        @staticmethod
        def _swappable(guest, old_bdm) -> dict: ...

    def _mirror(self, guest, live, disk, new_bdm,
                new_path: str) -> base.Job:
        """Start the hypervisor's copy onto the new volume; its job."""
        raise NotImplementedError

    def _running_swap(self, guest, live, disk, new_bdm,
                      new_path: str) -> base.Job | None:
        """The swap's job, if the hypervisor still runs it."""
        raise NotImplementedError

    def _swapped(self, guest, live, disk, entry: dict,
                 new_path: str) -> bool:
        """Whether the guest is on the new volume after a crash."""
        raise NotImplementedError

    def swap_volume(self, instance, old_bdm, new_bdm):
        guest = self._guest(instance)
        new_path = self.volumes.path(new_bdm['connection_info'])
        key = journal_mod.swap_key(new_bdm)
        with guest.lock:
            disk = self._swappable(guest, old_bdm)
            self.journal.record(key, 'mirror', action='swap',
                                instance_uuid=guest.uuid, old_bdm=old_bdm,
                                new_bdm=new_bdm)
            live = self._live(guest, disk)
            if live is None:
                self._img('convert', '-n', '-f', 'raw', '-O', 'raw',
                          disk['path'], new_path)
                self.repoint(guest, disk, new_bdm, new_path)
                self.journal.close(key)
                return base.FinishedJob()
            try:
                return self._mirror(guest, live, disk, new_bdm, new_path)
            except Exception:
                self.journal.close(key)
                raise

    def swap_recover(self, entry: dict) -> base.Job:
        """Settle a swap an agent crash cut short.

        The guest is on the new volume once the copy pivoted: then the
        record follows. A copy the hypervisor still runs is resumed. Else
        the guest stays on the old volume, and this raises.
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
            live = self._live(guest, disk)
            if live is not None:
                job = self._running_swap(guest, live, disk, new_bdm,
                                         new_path)
                if job is not None:
                    return job
            if self._swapped(guest, live, disk, entry, new_path):
                self.repoint(guest, disk, new_bdm, new_path)
                self.journal.close(key)
                return base.FinishedJob()
            self.journal.close(key)
            raise exception.DriverError(
                action='swap volume %s' % old_bdm['volume_id'],
                reason='the agent stopped before the copy was done; the '
                'guest stays on the old volume')

"""The live migration of a volume on a libvirt domain, and the legacy swap.

- start: an external disk-only snapshot puts a qcow2 overlay, backed by
  src, on top of the disk; the guest's writes go there;
- switch: a shallow block copy moves the overlay's data onto a second
  overlay, backed by dst, and pivots the guest onto it (libvirt cannot
  re-point a live overlay's backing file without that copy). A
  read-only disk, which has no overlay, is read through an empty qcow2
  front of its own: the same shallow copy moves it onto a new front
  backed by dst, writing nothing, so every guest of a shared read-only
  volume switches while the others read dst;
- complete and cancel: an active block commit of the overlay into its
  backing (dst, or src), then a pivot onto it.

libvirt is the record of where each disk is: after an agent crash the
driver reads the live XML and the block jobs, and aligns its own record.
The journal says which step the agent was about to take, as the qemu
driver's does; it decides only for a guest that is down, whose XML is
gone.
"""

import contextlib
import glob
import os
import time
import typing

import libvirt
from oslo_concurrency import lockutils
from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute.drivers import base
from volmig.compute.drivers import guests
from volmig.compute.drivers import journal as journal_mod
from volmig.compute.drivers import qemu_img
from volmig.compute.drivers.libvirt import domain
from volmig.compute.drivers.libvirt import jobs
from volmig.compute.drivers.libvirt import restarts

LOG = logging.getLogger(__name__)

SNAPSHOT_FLAGS = (libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY
                  | libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA
                  | libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT)
# The overlay holds guest writes until they are committed: the agent's.
OVERLAY_MODE = 0o600
# Seconds between looks at a block copy that the switch waits for.
COPY_POLL_INTERVAL = 0.05


class LiveMigration:
    """The migration methods of ``LibvirtDriver``."""

    if typing.TYPE_CHECKING:
        conf: typing.Any
        volumes: typing.Any
        journal: journal_mod.Journal

        def _guest(self, instance) -> domain.Guest: ...

        def live_domain(self, guest: domain.Guest) -> typing.Any: ...

        @staticmethod
        def _offline(guest, running: bool, migration) -> bool: ...

    def _img(self, *args: str) -> None:
        qemu_img.run(self.conf, *args)

    def _live_disk(self, instance, bdm):
        guest = self._guest(instance)
        return guest, guest.disks[bdm['volume_id']]

    @staticmethod
    def _sync(guest, found, disk) -> None:
        """Take where the disk is from libvirt: an agent that died between
        a libvirt call and saving its record knows less than libvirt."""
        live = domain.live_disk(found.XMLDesc(0), disk['target'])
        if live is None:
            return
        on_top = live['backing'] is not None
        top = 'front' if disk['attach_mode'] == 'ro' else 'overlay'
        where = {'path': live['backing'] if on_top else live['source'],
                 top: live['source'] if on_top else None}
        if where != {key: disk.get(key) for key in where}:
            LOG.warning('Guest %(uuid)s: volume %(volume)s is on %(where)s '
                        'by libvirt, not as recorded', {
                            'uuid': guest.uuid, 'volume': disk['volume_id'],
                            'where': where})
            disk.update(where)
            guest.save()

    def migration_start(self, instance, bdm, migration):
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            found = self.live_domain(guest)
            if self._offline(guest, found is not None, migration):
                return {}
            self._sync(guest, found, disk)
            if disk['attach_mode'] == 'ro' or disk.get('overlay'):
                # Read-only: src is frozen already. Overlay: a repeat.
                return {}
            self.journal.record(migration['id'], 'snapshot', action='start',
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            try:
                pause = self._snapshot(guest, found, disk, migration['id'])
            finally:
                # Undone or done: nothing is left to reconcile.
                self.journal.close(migration['id'])
            return {'start': pause}

    def new_top(self, guest, backing: str, name: str) -> str:
        """A new, empty qcow2 file ``name`` in the guest's directory,
        backed by the raw volume file ``backing``; returns its path."""
        top = guest.path(name)
        self._img('create', '-q', '-f', 'qcow2', '-b', backing, '-F', 'raw',
                  top)
        os.chmod(top, OVERLAY_MODE)
        return top

    def _snapshot(self, guest, found, disk, migration_id: str) -> float:
        """Put a new overlay on top of the disk; returns the pause."""
        overlay = self.new_top(guest, disk['path'],
                               'overlay-%s.qcow2' % migration_id)
        began = time.monotonic()
        try:
            found.snapshotCreateXML(
                domain.snapshot_xml(guest, disk, overlay), SNAPSHOT_FLAGS)
        except libvirt.libvirtError as exc:
            os.unlink(overlay)
            raise exception.DriverError(
                action='put the writes to volume %s on an overlay'
                % disk['volume_id'], reason=exc.get_error_message())
        pause = (time.monotonic() - began) * 1000
        disk['overlay'] = overlay
        guest.save()
        return pause

    @restarts.taken_again
    def migration_cancel(self, instance, bdm, migration):
        return self._merge(instance, bdm, migration['id'], 'cancel')

    @restarts.taken_again
    def migration_commit(self, instance, bdm, migration):
        return self._merge(instance, bdm, migration['id'], 'complete')

    def _merge(self, instance, bdm, migration_id: str,
               action: str) -> base.Job:
        """Commit the overlay into its backing: src on cancel, dst on
        complete (the switch made dst its backing)."""
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            found = self.live_domain(guest)
            if found is not None:
                self._sync(guest, found, disk)
            if not disk.get('overlay'):
                self.journal.close(migration_id)
                return base.FinishedJob()
            if found is None:
                self._merge_on_disk(guest, disk, migration_id, disk['path'])
                return base.FinishedJob()
            self.journal.record(migration_id, 'commit', action=action,
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            if not found.blockJobInfo(disk['target'], 0):
                try:
                    found.blockCommit(
                        disk['target'], None, None, 0,
                        libvirt.VIR_DOMAIN_BLOCK_COMMIT_ACTIVE)
                except libvirt.libvirtError as exc:
                    raise exception.DriverError(
                        action='commit the overlay of volume %s'
                        % disk['volume_id'], reason=exc.get_error_message())
            return jobs.CommitJob(typing.cast(typing.Any, self), guest, disk,
                                  migration_id)

    def _merge_on_disk(self, guest, disk, migration_id: str,
                       base_path: str) -> None:
        """The guest is down: merge its overlay into ``base_path``.

        A journal at ``drop_overlay`` means libvirt had pivoted off the
        overlay and later writes went to the base: merging the stale
        overlay again would undo them.
        """
        entry = self.journal.get(migration_id) or {}
        if entry.get('step') != 'drop_overlay':
            LOG.warning('Guest %(guest)s is down: merging overlay %(ovl)s '
                        'into %(base)s on disk', {'guest': guest.uuid,
                                                  'ovl': disk['overlay'],
                                                  'base': base_path})
            self._img('rebase', '-q', '-u', '-f', 'qcow2', '-b', base_path,
                      '-F', 'raw', disk['overlay'])
            self._img('commit', '-q', '-f', 'qcow2', disk['overlay'])
        self.drop_overlay(guest, disk, migration_id)

    def drop_overlay(self, guest, disk, migration_id: str) -> None:
        """The overlay is merged: delete it, and the job is over."""
        self.journal.record(migration_id, 'drop_overlay')
        with contextlib.suppress(FileNotFoundError):
            os.unlink(disk['overlay'])
        disk['overlay'] = None
        guest.save()
        self.journal.close(migration_id)

    @restarts.taken_again
    def migration_switch(self, instance, bdm, migration,
                         dst_connection_info):
        guest, disk = self._live_disk(instance, bdm)
        dst_path = self.volumes.path(dst_connection_info)
        with guest.lock:
            found = self.live_domain(guest)
            if found is not None:
                self._sync(guest, found, disk)
            if disk['path'] == dst_path:
                return {}  # A repeat: switched already.
            guests.check_dst(disk, dst_path, migration['id'])
            self.journal.record(migration['id'], 'switch',
                                action='complete', instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'], dst=dst_path)
            figures = {}
            if migration['mode'] == states.MODE_LIVE and found is not None:
                figures = self._switch_live(guest, found, disk, migration,
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

    def _switch_live(self, guest, found, disk, migration,
                     dst_path: str) -> dict:
        # A copy that a switch cut short (libvirtd went away under it) is
        # made again from the start, onto a new top: it holds the last.
        _abort_copy(found, disk)
        top = 'overlay' if disk.get('overlay') else 'front'
        if disk.get(top):
            target = self.new_top(guest, dst_path, _switch_target(
                disk, top, migration['id']))
            flags = (libvirt.VIR_DOMAIN_BLOCK_COPY_SHALLOW
                     | libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT)
            xml = domain.copy_xml(target, 'qcow2')
        else:
            # A read-only disk attached before fronts: copied whole.
            target, flags = None, libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT
            xml = domain.copy_xml(dst_path, 'raw')
        action = 'switch volume %s to %s' % (disk['volume_id'], dst_path)
        # One switch onto dst at a time: libvirt gives dst to the QEMU
        # user of the guest it switches (dynamic ownership), and while it
        # switched a second guest of a shared read-only volume, the first's
        # QEMU was refused dst ("Permission denied"), and the volume was
        # split between its guests. A QEMU that opened dst keeps reading
        # it whoever owns it next.
        with lockutils.lock('switch-%s' % dst_path):
            try:
                found.blockCopy(disk['target'], xml, None, flags)
                pause = self._pivot(found, disk, migration['id'], action)
            except libvirt.libvirtError as exc:
                raise exception.DriverError(action=action,
                                            reason=exc.get_error_message())
        if target is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(disk[top])
            disk[top] = target
        return {'switch': pause}

    def _pivot(self, found, disk, migration_id: str, action: str) -> float:
        """Wait for the switch's copy to be ready, then pivot onto it;
        returns the pause."""
        deadline = time.monotonic() + self.conf.qemu.qmp_timeout
        while (pause := jobs.pivot(found, disk['target'], lambda:
                                   self.journal.record(migration_id,
                                                       'pivot'))) is None:
            if time.monotonic() > deadline:
                found.blockJobAbort(disk['target'], 0)
                raise exception.DriverError(
                    action=action, reason='the copy was not ready within '
                    '%s s' % self.conf.qemu.qmp_timeout)
            time.sleep(COPY_POLL_INTERVAL)
        return pause

    @restarts.taken_again
    def migration_recover(self, instance, bdm, migration,
                          dst_connection_info):
        """Align the record with libvirt's after an agent crash.

        A switch's copy that the crash cut short is abandoned: the guest
        stays on its first overlay, and the switch is done again. A
        commit job is left to run; the next commit call polls it.
        """
        guest, disk = self._live_disk(instance, bdm)
        first = guest.path('overlay-%s.qcow2' % migration['id'])
        self.journal.announce(migration['id'])
        with guest.lock:
            found = self.live_domain(guest)
            if found is not None:
                _abort_copy(found, disk)
                self._sync(guest, found, disk)
            elif not disk.get('overlay') and os.path.exists(first):
                # Created, perhaps put on top before the guest stopped:
                # merging it is harmless if it holds nothing.
                disk['overlay'] = first
                guest.save()
            # The switch's new top if the guest never pivoted onto it,
            # and a read-only disk's last front if it did.
            switch_top = guest.path(_switch_target(disk, 'overlay',
                                                   migration['id']))
            fronts = glob.glob(guest.path('front-%s*.qcow2'
                                          % disk['volume_id']))
            for leftover in [first, switch_top, *fronts]:
                if leftover not in (disk.get('overlay'), disk.get('front')) \
                        and os.path.exists(leftover):
                    os.unlink(leftover)
            if dst_connection_info and disk['path'] == self.volumes.path(
                    dst_connection_info):
                return 'dst'
            return 'src'


def _switch_target(disk: dict, top: str, migration_id: str) -> str:
    """The file name of the new top a switch copies the disk's onto."""
    if top == 'overlay':
        return 'overlay-%s-dst.qcow2' % migration_id
    return 'front-%s-%s.qcow2' % (disk['volume_id'], migration_id)


def _abort_copy(found, disk: dict) -> None:
    """Abandon a switch's block copy that is still running on the disk;
    the guest stays on the top it is on."""
    info = found.blockJobInfo(disk['target'], 0)
    if info and info['type'] == libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_COPY:
        found.blockJobAbort(disk['target'], 0)

"""The live migration of a volume on a libvirt domain, and the legacy swap.

- start: an external disk-only snapshot puts a qcow2 overlay, backed by
  src, on top of the disk; the guest's writes go there;
- switch: a shallow block copy moves the overlay's data onto a second
  overlay, backed by dst, and pivots the guest onto it (libvirt cannot
  re-point a live overlay's backing file without that copy). A
  read-only disk, which has no overlay, is mirrored onto dst whole;
- complete and cancel: an active block commit of the overlay into its
  backing (dst, or src), then a pivot onto it.

libvirt is the record of where each disk is: after an agent crash the
driver reads the live XML and the block jobs, and aligns its own record.
"""

import contextlib
import os
import time
import typing

import libvirt
from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute.drivers import base
from volmig.compute.drivers import guests
from volmig.compute.drivers import qemu_img
from volmig.compute.drivers.libvirt import domain

LOG = logging.getLogger(__name__)

SNAPSHOT_FLAGS = (libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY
                  | libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA
                  | libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT)
# The overlay holds guest writes until they are committed: the agent's.
OVERLAY_MODE = 0o600
# Seconds between looks at a block copy that the switch waits for.
COPY_POLL_INTERVAL = 0.05


def pivot(found, target: str) -> float | None:
    """Pivot a ready block job; its pause in ms, or None if it is not
    ready yet."""
    info = found.blockJobInfo(target, 0)
    if not info or info['cur'] != info['end']:
        return None
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

    def __init__(self, driver: 'LiveMigration', guest: domain.Guest,
                 disk: dict, action: str):
        self._driver = driver
        self._guest = guest
        self._disk = disk
        self._action = action
        self.pauses: dict[str, float] = {}

    def done(self, found) -> bool:
        """Whether the job ended before this poll."""
        return False

    def pivoted(self, pause: float) -> None:
        """The disk is on the job's target now."""

    def poll(self) -> base.JobProgress:
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
                pause = pivot(found, disk['target'])
            except libvirt.libvirtError as exc:
                raise exception.DriverError(action=self._action,
                                            reason=exc.get_error_message())
            if pause is None:
                return base.JobProgress(info['cur'], info['end'], False)
            self.pivoted(pause)
            return base.JobProgress(info['end'], info['end'], True)


class CommitJob(PivotJob):
    """An active block commit of a disk's overlay into its backing."""

    def __init__(self, driver: 'LiveMigration', guest: domain.Guest,
                 disk: dict):
        super().__init__(driver, guest, disk, 'commit the overlay of '
                         'volume %s' % disk['volume_id'])

    def done(self, found) -> bool:
        live = domain.live_disk(found.XMLDesc(0), self._disk['target'])
        if live and live['backing'] is None:
            # Pivoted: by this job, or by one before an agent restart.
            self._driver.drop_overlay(self._guest, self._disk)
            return True
        return False

    def pivoted(self, pause: float) -> None:
        self.pauses['complete'] = pause
        self._driver.drop_overlay(self._guest, self._disk)


class SwapJob(PivotJob):
    """The legacy swap: a full block copy onto the new volume."""

    def __init__(self, driver: 'LiveMigration', guest: domain.Guest,
                 disk: dict, new_bdm: dict, new_path: str):
        super().__init__(driver, guest, disk,
                         'swap volume %s' % disk['volume_id'])
        self._new_bdm = new_bdm
        self._new_path = new_path

    def pivoted(self, pause: float) -> None:
        self._driver.repoint(self._guest, self._disk, self._new_bdm,
                             self._new_path)


class LiveMigration:
    """The migration methods of ``LibvirtDriver``."""

    if typing.TYPE_CHECKING:
        conf: typing.Any
        volumes: typing.Any

        def _guest(self, instance) -> domain.Guest: ...

        def live_domain(self, guest: domain.Guest) -> typing.Any: ...

        def repoint(self, guest, disk, new_bdm, path: str) -> None: ...

        @staticmethod
        def _swappable(guest, old_bdm) -> dict: ...

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
        on_overlay = live['backing'] is not None
        where = {'path': live['backing'] if on_overlay else live['source'],
                 'overlay': live['source'] if on_overlay else None}
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
            overlay = guest.path('overlay-%s.qcow2' % migration['id'])
            self._img('create', '-q', '-f', 'qcow2', '-b', disk['path'],
                      '-F', 'raw', overlay)
            os.chmod(overlay, OVERLAY_MODE)
            began = time.monotonic()
            try:
                found.snapshotCreateXML(
                    domain.snapshot_xml(guest, disk, overlay),
                    SNAPSHOT_FLAGS)
            except libvirt.libvirtError as exc:
                os.unlink(overlay)
                raise exception.DriverError(
                    action='put the writes to volume %s on an overlay'
                    % disk['volume_id'], reason=exc.get_error_message())
            pause = (time.monotonic() - began) * 1000
            disk['overlay'] = overlay
            guest.save()
            return {'start': pause}

    def migration_cancel(self, instance, bdm, migration):
        return self._merge(instance, bdm)

    def migration_commit(self, instance, bdm, migration):
        return self._merge(instance, bdm)

    def _merge(self, instance, bdm) -> base.Job:
        """Commit the overlay into its backing: src on cancel, dst on
        complete (the switch made dst its backing)."""
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            found = self.live_domain(guest)
            if found is not None:
                self._sync(guest, found, disk)
            if not disk.get('overlay'):
                return base.FinishedJob()
            if found is None:
                self._merge_on_disk(guest, disk, disk['path'])
                return base.FinishedJob()
            if not found.blockJobInfo(disk['target'], 0):
                try:
                    found.blockCommit(
                        disk['target'], None, None, 0,
                        libvirt.VIR_DOMAIN_BLOCK_COMMIT_ACTIVE)
                except libvirt.libvirtError as exc:
                    raise exception.DriverError(
                        action='commit the overlay of volume %s'
                        % disk['volume_id'], reason=exc.get_error_message())
            return CommitJob(self, guest, disk)

    def _merge_on_disk(self, guest, disk, base_path: str) -> None:
        """The guest is down: merge its overlay into ``base_path``."""
        LOG.warning('Guest %(guest)s is down: merging overlay %(ovl)s into '
                    '%(base)s on disk', {'guest': guest.uuid,
                                         'ovl': disk['overlay'],
                                         'base': base_path})
        self._img('rebase', '-q', '-u', '-f', 'qcow2', '-b', base_path,
                  '-F', 'raw', disk['overlay'])
        self._img('commit', '-q', '-f', 'qcow2', disk['overlay'])
        self.drop_overlay(guest, disk)

    def drop_overlay(self, guest, disk) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(disk['overlay'])
        disk['overlay'] = None
        guest.save()

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
            figures = {}
            if migration['mode'] == states.MODE_LIVE and found is not None:
                figures = self._switch_live(guest, found, disk, migration,
                                            dst_path)
            elif disk.get('overlay'):
                # The guest went down after a live start. dst is src as it
                # stood at start, so the overlay's writes go on top of it.
                self._merge_on_disk(guest, disk, dst_path)
            disk.update(path=dst_path,
                        attachment_id=migration['dst_attachment_id'])
            guest.save()
            return figures

    def _switch_live(self, guest, found, disk, migration,
                     dst_path: str) -> dict:
        if disk.get('overlay'):
            target = guest.path('overlay-%s-dst.qcow2' % migration['id'])
            self._img('create', '-q', '-f', 'qcow2', '-b', dst_path,
                      '-F', 'raw', target)
            os.chmod(target, OVERLAY_MODE)
            flags = (libvirt.VIR_DOMAIN_BLOCK_COPY_SHALLOW
                     | libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT)
            xml = domain.copy_xml(target, 'qcow2')
        else:
            target, flags = None, libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT
            xml = domain.copy_xml(dst_path, 'raw')
        action = 'switch volume %s to %s' % (disk['volume_id'], dst_path)
        try:
            found.blockCopy(disk['target'], xml, None, flags)
            deadline = time.monotonic() + self.conf.qemu.qmp_timeout
            while (pause := pivot(found, disk['target'])) is None:
                if time.monotonic() > deadline:
                    found.blockJobAbort(disk['target'], 0)
                    raise exception.DriverError(
                        action=action, reason='the copy was not ready '
                        'within %s s' % self.conf.qemu.qmp_timeout)
                time.sleep(COPY_POLL_INTERVAL)
        except libvirt.libvirtError as exc:
            raise exception.DriverError(action=action,
                                        reason=exc.get_error_message())
        if target is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(disk['overlay'])
            disk['overlay'] = target
        return {'switch': pause}

    def migration_recover(self, instance, bdm, migration,
                          dst_connection_info):
        """Align the record with libvirt's after an agent crash.

        A switch's copy that the crash cut short is abandoned: the guest
        stays on its first overlay, and the switch is done again. A
        commit job is left to run; the next commit call polls it.
        """
        guest, disk = self._live_disk(instance, bdm)
        first = guest.path('overlay-%s.qcow2' % migration['id'])
        with guest.lock:
            found = self.live_domain(guest)
            if found is not None:
                info = found.blockJobInfo(disk['target'], 0)
                if info and info['type'] == \
                        libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_COPY:
                    found.blockJobAbort(disk['target'], 0)
                self._sync(guest, found, disk)
            elif not disk.get('overlay') and os.path.exists(first):
                # Created, perhaps put on top before the guest stopped:
                # merging it is harmless if it holds nothing.
                disk['overlay'] = first
                guest.save()
            for leftover in (first, first.replace('.qcow2', '-dst.qcow2')):
                if leftover != disk.get('overlay') and os.path.exists(
                        leftover):
                    os.unlink(leftover)
            if dst_connection_info and disk['path'] == self.volumes.path(
                    dst_connection_info):
                return 'dst'
            return 'src'

    def swap_volume(self, instance, old_bdm, new_bdm):
        guest = self._guest(instance)
        new_path = self.volumes.path(new_bdm['connection_info'])
        with guest.lock:
            disk = self._swappable(guest, old_bdm)
            found = self.live_domain(guest)
            if found is None:
                self._img('convert', '-n', '-f', 'raw', '-O', 'raw',
                          disk['path'], new_path)
                self.repoint(guest, disk, new_bdm, new_path)
                return base.FinishedJob()
            try:
                found.blockCopy(disk['target'],
                                domain.copy_xml(new_path, 'raw'), None,
                                libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT)
            except libvirt.libvirtError as exc:
                raise exception.DriverError(
                    action='swap volume %s' % disk['volume_id'],
                    reason=exc.get_error_message())
            return SwapJob(self, guest, disk, new_bdm, new_path)

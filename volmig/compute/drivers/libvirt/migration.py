"""The live migration of a volume on a libvirt domain.

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

``volmig.compute.drivers.steps`` keeps the steps' order; this is
libvirt's part of each. libvirt is the record of where each disk is:
after an agent crash the driver reads the live XML and the block jobs,
and aligns its own record. The journal says which step the agent was
about to take; it decides only for a guest that is down, whose XML is
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
from volmig.compute.drivers import base
from volmig.compute.drivers import qemu_img
from volmig.compute.drivers import steps
from volmig.compute.drivers.libvirt import domain
from volmig.compute.drivers.libvirt import jobs
from volmig.compute.drivers.libvirt import restarts

LOG = logging.getLogger(__name__)

SNAPSHOT_FLAGS = (libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY
                  | libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA
                  | libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT)
# Seconds between looks at a block copy that the switch waits for.
COPY_POLL_INTERVAL = 0.05


class LiveMigration(steps.MigrationSteps):
    """libvirt's part of a migration's steps; mixed into LibvirtDriver."""

    if typing.TYPE_CHECKING:
        conf: typing.Any

        def live_domain(self, guest: domain.Guest) -> typing.Any: ...

    # libvirtd may go away under any of these: each is taken again whole.
    migration_switch = restarts.taken_again(
        steps.MigrationSteps.migration_switch)
    migration_commit = restarts.taken_again(
        steps.MigrationSteps.migration_commit)
    migration_cancel = restarts.taken_again(
        steps.MigrationSteps.migration_cancel)
    migration_recover = restarts.taken_again(
        steps.MigrationSteps.migration_recover)

    def _img(self, *args: str) -> None:
        qemu_img.run(self.conf, *args)

    def _live(self, guest, disk):
        found = self.live_domain(guest)
        if found is not None:
            self._sync(guest, found, disk)
        return found

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

    def new_top(self, guest, backing: str, name: str) -> str:
        """A new, empty qcow2 file ``name`` in the guest's directory,
        backed by the raw volume file ``backing``; returns its path."""
        top = guest.path(name)
        self._img('create', '-q', '-f', 'qcow2', '-b', backing, '-F', 'raw',
                  top)
        os.chmod(top, steps.OVERLAY_MODE)
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

    def _commit(self, guest, found, disk, migration_id: str) -> base.Job:
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

    @staticmethod
    def _overlay_file(disk) -> str:
        return disk['overlay']

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

    def _settle(self, guest, disk, migration_id: str) -> None:
        """A switch's copy that the crash cut short is abandoned: the
        guest stays on its first overlay, and the switch is done again. A
        commit job is left to run; the next commit call polls it."""
        first = guest.path('overlay-%s.qcow2' % migration_id)
        found = self.live_domain(guest)
        if found is not None:
            _abort_copy(found, disk)
            self._sync(guest, found, disk)
        elif not disk.get('overlay') and os.path.exists(first):
            # Created, perhaps put on top before the guest stopped:
            # merging it is harmless if it holds nothing.
            disk['overlay'] = first
            guest.save()
        # The switch's new top if the guest never pivoted onto it, and a
        # read-only disk's last front if it did.
        switch_top = guest.path(_switch_target(disk, 'overlay',
                                               migration_id))
        fronts = glob.glob(guest.path('front-%s*.qcow2'
                                      % disk['volume_id']))
        for leftover in [first, switch_top, *fronts]:
            if leftover not in (disk.get('overlay'), disk.get('front')) \
                    and os.path.exists(leftover):
                os.unlink(leftover)


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

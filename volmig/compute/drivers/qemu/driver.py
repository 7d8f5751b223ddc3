"""The QEMU driver: live volume migration with a local overlay.

The QMP sequence is in doc/source/design.rst, "Compute drivers". Start
snapshots the volume's node
into a host-local qcow2 overlay, so src gets no more writes. Complete
opens dst, reopens the overlay onto it, closes src, and commits the
overlay into dst as a tracked job. Cancel commits the overlay back into
src. Each step is written to the job journal first.

A read-only disk gets no overlay at start: nothing can write to it, so
src is frozen already. On complete it gets an empty read-only overlay
(a shim) only so that its backing can be switched to dst; the shim is
dropped when the guest next starts.
"""

import contextlib
import functools
import os
import shutil
import subprocess  # nosec B404
import threading

from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute import volumes
from volmig.compute.drivers import base
from volmig.compute.drivers.qemu import confinement
from volmig.compute.drivers.qemu import guest as guest_mod
from volmig.compute.drivers.qemu import images
from volmig.compute.drivers.qemu import jobs
from volmig.compute.drivers.qemu import journal as journal_mod
from volmig.compute.drivers.qemu import monitor as qmp
from volmig.compute.drivers.qemu import settle
from volmig.conf import compute as compute_conf

LOG = logging.getLogger(__name__)
OVERLAY_MODE = 0o600

# Seconds QEMU may take to exit after it reported SHUTDOWN.
SHUTDOWN_EXIT_TIMEOUT = 10


class QemuDriver(base.ComputeDriver):

    def __init__(self, conf):
        super().__init__(conf)
        root = compute_conf.state_path(conf)
        self._guests_dir = os.path.join(root, 'guests')
        self.journal = journal_mod.Journal(os.path.join(root, 'jobs'))
        self.images = images.ImageStore(conf.qemu.image_dir)
        self._loop: qmp.EventLoop | None = None
        self._guests: dict[str, guest_mod.Guest] = {}
        self._users = threading.Lock()
        self.volumes = volumes.VolumeConnector(conf)

    @property
    def capabilities(self):
        return {base.LIVE_VOLUME_MIGRATION: True, base.MULTIATTACH: True,
                base.READONLY_ATTACH: True}

    # Agent start and stop.

    def _event_loop(self) -> qmp.EventLoop:
        if self._loop is None:
            self._loop = qmp.EventLoop()
        return self._loop

    def init_host(self, host):
        os.makedirs(self._guests_dir, exist_ok=True)
        for uuid in sorted(os.listdir(self._guests_dir)):
            guest = self._new_guest(uuid)
            try:
                guest.load()
            except FileNotFoundError:
                continue
            if guest.is_running():
                guest.connect()
                LOG.info('Reconnected to running guest %s', uuid)
            self._guests[uuid] = guest

    def cleanup_host(self):
        for guest in self._guests.values():
            guest.disconnect()
        if self._loop is not None:
            self._loop.stop()
            self._loop = None

    def stop_guests(self) -> None:
        """Shut every guest off, for the embedded default's exit."""
        for guest in self._guests.values():
            guest.shutdown()

    # Guests.

    def _new_guest(self, uuid: str) -> guest_mod.Guest:
        return guest_mod.Guest(self.conf, os.path.join(self._guests_dir,
                                                       uuid),
                               uuid, self._event_loop(),
                               functools.partial(self._guest_event, uuid))

    def _guest_event(self, uuid: str, name: str, data: dict) -> None:
        # A "quit" is the agent's own doing (destroy, hard stop, exit),
        # recorded by whoever sent it.
        if (name != 'SHUTDOWN' or self.power_listener is None
                or data.get('reason') == 'host-qmp-quit'):
            return
        guest = self._guests.get(uuid)
        if guest is None:
            return
        # QEMU exits right after SHUTDOWN; tell the agent once it has.
        threading.Thread(target=self._report_shutdown, args=(guest,),
                         name='shutdown-%s' % uuid, daemon=True).start()

    def _report_shutdown(self, guest) -> None:
        listener = self.power_listener
        if listener is None or not guest.gone_within(SHUTDOWN_EXIT_TIMEOUT):
            return
        try:
            listener(guest.uuid)
        except Exception:
            # The periodic sync records it later.
            LOG.exception('Recording that guest %s powered off failed',
                          guest.uuid)

    def _guest(self, instance) -> guest_mod.Guest:
        try:
            return self._guests[instance['uuid']]
        except KeyError:
            raise exception.InstanceNotFound(instance_uuid=instance['uuid'])

    def _new_disk(self, bdm: dict, slot: int) -> dict:
        return {'volume_id': bdm['volume_id'],
                'attachment_id': bdm['attachment_id'],
                'attach_mode': bdm['attach_mode'],
                'path': self.volumes.path(bdm['connection_info']),
                'multiattach': bool(bdm['connection_info'].get(
                    'multiattach')),
                'boot_index': bdm.get('boot_index'),
                'slot': slot, 'gen': 0, 'overlay': None}

    def _set_disks(self, guest, block_devices) -> None:
        slots = {volume_id: disk['slot']
                 for volume_id, disk in guest.disks.items()}
        disks: dict[str, dict] = {}
        # The boot disk takes the first slot, where the firmware looks.
        for bdm in sorted(block_devices, key=lambda bdm: (
                bdm.get('boot_index') is None, bdm.get('boot_index') or 0)):
            slot = slots.get(bdm['volume_id'], len(disks))
            disk = guest.disks.get(bdm['volume_id']) or self._new_disk(
                bdm, slot)
            disk.update(attachment_id=bdm['attachment_id'],
                        attach_mode=bdm['attach_mode'],
                        path=self.volumes.path(bdm['connection_info']))
            disks[bdm['volume_id']] = disk
        guest.record['disks'] = disks
        guest.save()

    def _image(self, guest) -> dict | None:
        name = guest.record.get('image_ref')
        return self.images.get(name) if name else None

    def _give_user(self, guest) -> None:
        """A uid of its own for the guest's QEMU, kept while it lives."""
        with self._users:
            if guest.record.get('uid') is None:
                taken = {other.record.get('uid')
                         for other in self._guests.values()}
                guest.record['uid'] = confinement.pick_uid(self.conf, taken)
                guest.save()

    def spawn(self, instance, block_devices):
        guest = self._new_guest(instance['uuid'])
        with guest.lock:
            guest.record['image_ref'] = instance.get('image_ref')
            image = self._image(guest)
            if image and not image.get('kernel'):
                raise exception.DriverError(
                    action='boot from image %s' % image['name'],
                    reason='it is a disk image: create a volume from it and '
                    'boot from the volume (boot_index 0)')
            self._set_disks(guest, block_devices)
            self._give_user(guest)
            self._guests[guest.uuid] = guest
            try:
                guest.launch(image)
            except Exception:
                guest.shutdown()
                raise

    def destroy(self, instance):
        guest = self._guests.pop(instance['uuid'], None)
        if guest is None:
            return
        with guest.lock:
            guest.shutdown()
            shutil.rmtree(guest.directory, ignore_errors=True)

    def power_off(self, instance):
        guest = self._guest(instance)
        with guest.lock:
            guest.power_down(self.conf.compute.shutdown_timeout)

    def power_on(self, instance, block_devices):
        guest = self._guest(instance)
        with guest.lock:
            if guest.is_running():
                return
            self._set_disks(guest, block_devices)
            self._give_user(guest)
            guest.launch(self._image(guest))

    def get_console_output(self, instance, length):
        return self._guest(instance).console_output(length)

    def get_power_state(self, instance):
        guest = self._guests.get(instance['uuid'])
        if guest is None:
            return states.POWER_NOSTATE
        return (states.POWER_RUNNING if guest.is_running()
                else states.POWER_SHUTDOWN)

    def attach_volume(self, instance, bdm):
        guest = self._guest(instance)
        with guest.lock:
            disk = self._new_disk(bdm, guest.free_slot())
            if guest.is_running():
                guest.plug(disk)
            guest.disks[bdm['volume_id']] = disk
            guest.save()

    def detach_volume(self, instance, bdm):
        guest = self._guest(instance)
        with guest.lock:
            disk = guest.disks.get(bdm['volume_id'])
            if disk is None:
                return
            if guest.is_running():
                guest.unplug(disk)
            del guest.disks[bdm['volume_id']]
            guest.save()

    # The legacy swap: QEMU copies, as Nova's swap-volume does.

    def swap_volume(self, instance, old_bdm, new_bdm):
        guest = self._guest(instance)
        new_path = self.volumes.path(new_bdm['connection_info'])
        with guest.lock:
            disk = guest.disks[old_bdm['volume_id']]
            if disk.get('overlay'):
                raise exception.DriverError(
                    action='swap volume %s' % disk['volume_id'],
                    reason='a volume migration has it on an overlay')
            key = jobs.swap_key(new_bdm)
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

    def swaps_to_recover(self) -> list[dict]:
        return [entry for entry in self.journal.open_entries()
                if entry.get('action') == 'swap']

    def swap_recover(self, entry: dict) -> base.Job:
        """Settle a swap an agent crash cut short.

        The guest is on the new volume once the mirror pivoted: then the
        job finishes the swap. Before that, a mirror QEMU still runs is
        resumed; one that is gone leaves the guest on the old volume, and
        this raises.
        """
        old_bdm, new_bdm = entry['old_bdm'], entry['new_bdm']
        new_path = self.volumes.path(new_bdm['connection_info'])
        key = jobs.swap_key(new_bdm)
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

    def repoint(self, guest, disk, new_bdm, path: str) -> None:
        """The disk is the new volume from now on."""
        del guest.disks[disk['volume_id']]
        disk.update(volume_id=new_bdm['volume_id'], path=path,
                    attachment_id=new_bdm['attachment_id'])
        guest.disks[disk['volume_id']] = disk
        guest.save()

    # Volume migration.

    def _img(self, *args: str) -> None:
        result = subprocess.run(  # nosec B603
            [self.conf.qemu.img_binary, *args], capture_output=True,
            text=True, check=False, env=confinement.ENVIRONMENT)
        if result.returncode:
            raise exception.DriverError(action='run qemu-img %s' % args[0],
                                        reason=result.stderr.strip())

    def _live_disk(self, instance, bdm):
        guest = self._guest(instance)
        return guest, guest.disks[bdm['volume_id']]

    def migration_start(self, instance, bdm, migration):
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            running = guest.is_running()
            if migration['mode'] == states.MODE_OFFLINE or not running:
                if running:
                    raise exception.InstanceMustBeShutOff(
                        host=migration['host'],
                        instance_uuid=instance['uuid'])
                if migration['mode'] == states.MODE_LIVE:
                    # The guest powered off or died since it was seen
                    # running: nothing writes to src, so this is offline.
                    LOG.warning('Guest %s is not running: volume migration '
                                '%s goes on offline', guest.uuid,
                                migration['id'])
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
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            if self._overlay_to_merge(disk) is None:
                self.journal.close(migration['id'])
                return base.FinishedJob()
            if not guest.is_running():
                self._merge_on_disk(guest, disk, migration['id'])
                return base.FinishedJob()
            self.journal.record(migration['id'], 'commit', action='cancel',
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            return self._commit(guest, disk, migration['id'])

    def _check_dst(self, disk, dst_path: str, migration_id: str) -> None:
        # blockdev-reopen takes a backing node of the wrong size without a
        # word, so the size is checked before anything switches.
        try:
            dst_size = os.stat(dst_path).st_size
        except FileNotFoundError:
            raise exception.DestinationMismatch(
                what='volume', migration_id=migration_id,
                reason='%s does not exist' % dst_path)
        src_size = os.stat(disk['path']).st_size
        if dst_size != src_size:
            raise exception.DestinationMismatch(
                what='volume', migration_id=migration_id,
                reason='it has %d bytes, src has %d' % (dst_size, src_size))

    def migration_switch(self, instance, bdm, migration,
                         dst_connection_info):
        guest, disk = self._live_disk(instance, bdm)
        dst_path = self.volumes.path(dst_connection_info)
        with guest.lock:
            if disk['path'] == dst_path:
                # A repeat, after an agent restart: switched already.
                return {}
            self._check_dst(disk, dst_path, migration['id'])
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
        guest, disk = self._live_disk(instance, bdm)
        with guest.lock:
            if self._overlay_to_merge(disk) is None:
                self.journal.close(migration['id'])
                return base.FinishedJob()
            if not guest.is_running():
                self._merge_on_disk(guest, disk, migration['id'])
                return base.FinishedJob()
            self.journal.record(migration['id'], 'commit', action='complete',
                                instance_uuid=guest.uuid,
                                volume_id=disk['volume_id'])
            return self._commit(guest, disk, migration['id'])

    def _commit(self, guest, disk, migration_id: str) -> jobs.CommitJob:
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
        entry = self.journal.get(migration['id'])
        if entry:
            LOG.info('Volume migration %(id)s: the journal says step '
                     '%(step)s of %(action)s', {
                         'id': migration['id'], 'step': entry['step'],
                         'action': entry.get('action')})
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

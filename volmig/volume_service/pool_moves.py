"""Moving a volume between pools, driven as Cinder would drive it.

1. create dst in the new pool; 2. ``start`` each attachment, so src is
frozen; 3. copy src to dst; 4. verify dst against src by checksum;
5. ``complete`` each attachment onto a dst attachment; 6. dst takes the
volume's id; 7. src is deleted. On a failure before any complete, the
started attachments are cancelled, dst is deleted, and the volume stays
whole on src. Once a guest may be on dst, dst is never deleted: the
migration goes forward, or waits for an operator. A copy whose migration
ended (an operator's abort) stops, for no complete can follow it.

Each step is recorded on the volume first (``migration_dst``,
``migration_ids``, ``migration_src_path``), so a volmig-volume that
restarts resumes or rolls back every migration it had under way
(``recovery``).

Not knowing is not failing: after ``start``, every call to volmig-api is
asked again while its answer is lost (volmig-api or its conductor
restarting, ``MigrationClient.patient``). Only the migration's own end,
which the conductor's stall timeout decides, fails a move; a cancel goes
through the conductor once it is back.

``[storage] max_concurrent_copies`` caps the moves under way into or
out of each pool; one over it waits in ``copy_queue``.
"""

import os
import threading
import time
import typing

import futurist
from oslo_log import log as logging

from volmig import client
from volmig import concurrency
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import states
from volmig.datapath import copy as copy_mod
from volmig.datapath import pacing
from volmig.volume_service import copy_queue
from volmig.volume_service import unfinished

LOG = logging.getLogger(__name__)

# The conductor ends every migration, or fails it for an operator (its
# stall timeout), so waiting for one has no deadline of its own here.
FOREVER = float('inf')
# Seconds between the copy's asks whether its migrations are still
# started: an abort stops the copy within this and one chunk, at one
# call per attachment and interval.
STILL_STARTED_INTERVAL = 2.0
# The pauses between the asks whether a guest is off src, while its
# complete holds the other copies on its disks (``pacing.first``): each
# ask's delay is theirs too, and the client's own (0.2 s) held them about
# 0.1 s past the switch, at each attached volume of a drain. 0.02 s for
# the first 2 s (a switch took 0.2-0.6 s here), then the client's own: a
# complete that waits on an agent or an operator is not asked 50 times a
# second.
SWITCH_POLLS = (0.02,) * 100


class Mover(copy_queue.CopyQueue, unfinished.UnfinishedMoves):

    def __init__(self, volumes, conf, migration_client=None):
        self.volumes = volumes
        self.conf = conf
        # volmig-api's RPC face, as any block-storage service reaches it.
        self.client = migration_client or client.MigrationClient()
        # Every call after start: a lost answer is not a failure.
        self.patient = self.client.patient()
        self._executor = futurist.ThreadPoolExecutor(
            max_workers=conf.storage.migration_workers)
        self._interrupted: list[dict] = []
        # Set once the migrations a restart cut off have been taken back.
        self.resumed = False
        # Called when a migration ends: a slot is free (a drain's too).
        self.on_end: typing.Callable[[], None] = lambda: None
        # A pool's count of moves and the claim it decides (copy_queue).
        self._slots = threading.Lock()

    def stop(self) -> None:
        concurrency.stop_executor(self._executor)

    def pool_path(self, pool: str) -> str:
        try:
            return self.conf.storage.pools[pool]
        except KeyError:
            raise exception.PoolNotFound(pool=pool)

    def begin(self, ctxt, volume_id: str, pool: str,
              max_bandwidth_mbps: int | None = None,
              queue: bool = True) -> dict:
        """Steps 1 and 2; the rest runs in the background.

        Returns the volume once every attachment has started, so a
        refusal of ``start`` comes back to the caller as it is; or at
        once, ``queued``, when a pool's copy cap holds it back (without
        ``queue``, that raises NoCopySlot and changes nothing).
        """
        self.pool_path(pool)
        volume = self._claim(volume_id, pool, max_bandwidth_mbps, queue)
        if volume['migration_status'] == states.POOL_MOVE_QUEUED:
            LOG.info('Volume %s: migration to pool %s queued: %s',
                     volume_id, pool, volume['migration_error'])
            return volume
        return self._start(volmig_context.get_service_context(), volume_id,
                           pool, max_bandwidth_mbps)

    def _start(self, service, volume_id: str, pool: str,
               max_bandwidth_mbps: int | None) -> dict:
        pool_dir = self.pool_path(pool)
        volume = self.volumes.get_volume(service, volume_id)
        dst = None
        try:
            dst = self.volumes.create_file_volume(
                service, volume['size_mb'], pool, pool_dir,
                name='migration of %s' % volume_id,
                multiattach=volume['multiattach'],
                migration_source=volume_id)
            self.volumes.update_volume(volume_id, migration_dst=dst['id'])
            for attachment in volume['attachments']:
                if attachment['attach_status'] == states.ATTACH_ATTACHED:
                    # Queued by a compute cap: _finish waits for it.
                    started = self.client.start(service, attachment['id'],
                                                wait=False)
                    volume = self.volumes.add_migration_id(volume_id,
                                                           started['id'])
        except Exception as exc:
            self._abandon(service, volume_id, dst, exc)
            raise
        volume = self.volumes.update_volume(
            volume_id, migration_status=states.POOL_MOVE_MIGRATING)
        LOG.info('Volume %(id)s is migrating to pool %(pool)s (%(count)d '
                 'attachment(s) started)',
                 {'id': volume_id, 'pool': pool,
                  'count': len(volume['migration_ids'])})
        bandwidth = (max_bandwidth_mbps if max_bandwidth_mbps is not None
                     else self.conf.storage.max_bandwidth_mbps)
        self._executor.submit(self._finish, service, volume_id,
                              bandwidth * 1024 * 1024)
        return volume

    def _migrations(self, ctxt, volume: dict) -> list[dict]:
        return [self.patient.get(ctxt, migration_id)
                for migration_id in volume['migration_ids']]

    def _finish(self, ctxt, volume_id: str, max_bytes_per_second: int,
                copied: bool = False) -> None:
        """Steps 3 to 7; with ``copied``, from step 5."""
        volume = self.volumes.get_volume(ctxt, volume_id)
        dst = self.volumes.get_volume(ctxt, volume['migration_dst'])
        try:
            for migration in self._migrations(ctxt, volume):
                if migration['status'] == states.QUEUED:
                    self.patient.wait_for(ctxt, migration['id'],
                                          states.STARTED, timeout=FOREVER)
            if not copied:
                copy_mod.verified_copy(self.volumes, self.conf, volume, dst,
                                       max_bytes_per_second,
                                       self._still_started(ctxt, volume))
            # The guests' switches go first on the volume's disks.
            with pacing.first([volume['path'], dst['path']],
                              self.conf.storage.copy_pacing):
                migrations = self._complete(ctxt, volume, dst)
        except Exception as exc:
            LOG.exception('Migration of volume %s failed', volume_id)
            self._abandon(ctxt, volume_id, dst, exc)
            return
        # dst carries the volume's id from now on; src is to be deleted.
        self.volumes.adopt(volume_id, dst['id'],
                           {migration['src_attachment_id']
                            for migration in migrations}, 'success')
        self._drop_src(volume_id)
        LOG.info('Volume %s now lives in pool %s', volume_id, dst['pool'])
        self._after_end()

    def _complete(self, ctxt, volume: dict, dst: dict) -> list[dict]:
        """Step 5: each migration completed onto dst; they are returned
        once each guest is off src."""
        for migration in self._migrations(ctxt, volume):
            if migration['status'] == states.STARTED:
                attachment = self._dst_attachment(ctxt, volume, dst,
                                                  migration)
                self.patient.complete(ctxt, migration['src_attachment_id'],
                                      attachment['id'], wait=False)
        return [self.patient.wait_for(
            ctxt, migration['id'], client.SRC_RELEASED_OR_LATER,
            timeout=FOREVER, poll_intervals=SWITCH_POLLS)
            for migration in self._migrations(ctxt, volume)]

    def _still_started(self, ctxt, volume: dict):
        """The copy's check: it raises once a migration of the volume is
        no longer started. A lost answer lets the copy go on; the end of
        the copy asks again, patiently."""
        asked = [time.monotonic()]

        def check() -> None:
            if time.monotonic() - asked[0] < STILL_STARTED_INTERVAL:
                return
            asked[0] = time.monotonic()
            for migration_id in volume['migration_ids']:
                try:
                    status = self.client.get(ctxt, migration_id)['status']
                except rpc.LOST:
                    return
                if status != states.STARTED:
                    raise exception.MigrationFailed(
                        migration_id=migration_id,
                        reason='it is %s, so its copy stopped' % status)
        return check

    def _dst_attachment(self, ctxt, volume, dst, migration) -> dict:
        """dst's attachment for the migration's server, made once."""
        for attachment in dst['attachments']:
            if attachment['instance_uuid'] == migration['instance_uuid']:
                return attachment
        mode = next((attachment['attach_mode']
                     for attachment in volume['attachments']
                     if attachment['id'] == migration['src_attachment_id']),
                    'rw')
        return self.volumes.attachment_create(
            ctxt, dst['id'], migration['instance_uuid'], mode)

    def _drop_src(self, volume_id: str) -> None:
        volume = self.volumes.get_volume(None, volume_id)
        src_path = volume['migration_src_path']
        if src_path and os.path.exists(src_path):
            os.unlink(src_path)
        self.volumes.update_volume(volume_id, migration_src_path=None)

    def _abandon(self, ctxt, volume_id, dst, reason) -> None:
        """Cancel what started and drop dst; the volume stays on src.

        Unless a guest may be on dst: then both volumes stay, and the
        volume's error says which migration an operator must recover.
        """
        current = set(self.volumes.get_volume(ctxt,
                                              volume_id)['migration_ids'])
        in_progress = [
            migration for migration in self.patient.list(
                ctxt, volume_id=volume_id)
            if migration['status'] not in states.TERMINAL
            or migration['id'] in current]
        on_dst = [m['id'] for m in in_progress
                  if unfinished.guest_may_be_on_dst(m)]
        if on_dst:
            LOG.error('Migration of volume %s failed after a guest may have '
                      'switched to dst; keeping src and dst', volume_id)
            self.volumes.update_volume(
                volume_id, migration_status='error',
                migration_error='%s; a guest may be on dst %s: the volume '
                'follows its guests once migration %s ends or is recovered '
                '(volmig-manage migration recover)' % (
                    exception.safe_message(reason),
                    dst['id'] if dst else None, ', '.join(on_dst)))
            return
        for migration in in_progress:
            if migration['status'] in states.TERMINAL:
                continue
            try:
                if migration['status'] in (states.STARTED, states.QUEUED):
                    self.patient.cancel(ctxt,
                                        migration['src_attachment_id'])
                self.patient.wait_for(ctxt, migration['id'],
                                      {states.CANCELLED, states.ERROR})
            except Exception:
                LOG.exception('Could not cancel volume migration %s',
                              migration['id'])
        if dst is not None:
            self._drop_dst(dst)
        self.volumes.update_volume(
            volume_id, migration_status='error', migration_dst=None,
            migration_error=exception.safe_message(reason))
        self._after_end()

    def _drop_dst(self, dst: dict) -> None:
        self.volumes.purge(dst['id'])
        if os.path.exists(dst['path']):
            os.unlink(dst['path'])

    def find_interrupted(self) -> None:
        """At start-up, before any request: the migrations a previous
        volmig-volume left under way. Only these are resumed; any begun
        since belong to this process."""
        self._interrupted = self.volumes.with_migration_under_way(
            states.POOL_MOVE_COPYING)

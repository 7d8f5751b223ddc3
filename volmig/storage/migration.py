"""Moving a volume between pools, driven as Cinder would drive it.

1. create dst in the new pool; 2. ``start`` each attachment, so src is
frozen; 3. copy src to dst; 4. verify dst against src by checksum;
5. ``complete`` each attachment onto a dst attachment; 6. dst takes the
volume's id; 7. src is deleted. On any failure the started attachments
are cancelled, dst is deleted, and the volume stays whole on src.
"""

import os
import time

import futurist
from oslo_log import log as logging

from volmig import client
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.storage import copy as copy_mod
from volmig.volume import base

LOG = logging.getLogger(__name__)

MIGRATING = ('starting', 'migrating')
# Seconds between progress records of a copy.
PROGRESS_INTERVAL = 0.5


class Migrator:

    def __init__(self, volumes, conf):
        self.volumes = volumes
        self.conf = conf
        self.client = client.MigrationClient()
        self._executor = futurist.ThreadPoolExecutor(
            max_workers=conf.storage.migration_workers)

    def stop(self) -> None:
        self._executor.shutdown(wait=True)

    def pool_path(self, pool: str) -> str:
        try:
            return self.conf.storage.pools[pool]
        except KeyError:
            raise exception.PoolNotFound(pool=pool)

    def _claim(self, volume_id: str, pool: str) -> dict:
        """Mark the volume as migrating, or refuse."""
        with self.volumes.records() as records:
            volume = self.volumes.volume(records, volume_id)
            if volume.get('migration_status') in MIGRATING:
                raise exception.MigrationInProgress(
                    what='volume %s' % volume_id,
                    reason='it is already migrating to pool %s'
                    % volume['migration_pool'])
            if volume.get('migration_source'):
                raise exception.Invalid(
                    reason='volume %s is the target of a migration'
                    % volume_id)
            if volume['pool'] == pool:
                raise exception.Invalid(reason='volume %s is in pool %s '
                                        'already' % (volume_id, pool))
            volume.update(migration_status='starting', migration_pool=pool,
                          migration_progress=0, migration_error=None,
                          migration_ids=[])
            return self.volumes.present(records, volume)

    def begin(self, ctxt, volume_id: str, pool: str,
              max_bandwidth_mbps: int | None = None) -> dict:
        """Steps 1 and 2; the rest runs in the background.

        Returns the volume once every attachment has started, so a
        refusal of ``start`` comes back to the caller as it is.
        """
        pool_dir = self.pool_path(pool)
        volume = self._claim(volume_id, pool)
        service = volmig_context.get_service_context()
        dst = None
        started: list[dict] = []
        try:
            dst = self.volumes.create_file_volume(
                ctxt, volume['size_mb'], pool, pool_dir,
                name='migration of %s' % volume_id,
                multiattach=volume['multiattach'],
                migration_source=volume_id)
            for attachment in volume['attachments']:
                if attachment['attach_status'] == base.ATTACH_ATTACHED:
                    started.append(self.client.start(service,
                                                     attachment['id']))
        except Exception as exc:
            self._abandon(service, volume_id, dst, started, exc)
            raise
        bandwidth = (max_bandwidth_mbps if max_bandwidth_mbps is not None
                     else self.conf.storage.max_bandwidth_mbps)
        volume = self.volumes.update_volume(
            volume_id, migration_status='migrating',
            migration_ids=[migration['id'] for migration in started])
        LOG.info('Volume %(id)s is migrating to pool %(pool)s (%(count)d '
                 'attachment(s) started)', {'id': volume_id, 'pool': pool,
                                             'count': len(started)})
        self._executor.submit(self._finish, service, volume, dst, started,
                              bandwidth * 1024 * 1024)
        return volume

    def _finish(self, ctxt, volume, dst, started, max_bytes_per_second):
        """Steps 3 to 7."""
        volume_id = volume['id']
        completed: list[dict] = []
        try:
            self._copy(volume, dst, max_bytes_per_second)
            for migration in started:
                attachment = self.volumes.attachment_create(
                    ctxt, dst['id'], migration['instance_uuid'],
                    self._mode(volume, migration))
                self.client.complete(ctxt, migration['src_attachment_id'],
                                     attachment['id'])
                completed.append(migration)
        except Exception as exc:
            LOG.exception('Migration of volume %s failed', volume_id)
            self._abandon(ctxt, volume_id, dst, [
                m for m in started if m not in completed], exc)
            return
        src_path = self._adopt(volume_id, dst, started)
        os.unlink(src_path)
        LOG.info('Volume %s now lives in pool %s', volume_id, dst['pool'])

    @staticmethod
    def _mode(volume, migration) -> str:
        for attachment in volume['attachments']:
            if attachment['id'] == migration['src_attachment_id']:
                return attachment['attach_mode']
        return 'rw'

    def _copy(self, volume, dst, max_bytes_per_second) -> None:
        chunk = self.conf.storage.copy_chunk_kb * 1024
        last = [0.0]

        def progress(done, total):
            now = time.monotonic()
            if now - last[0] >= PROGRESS_INTERVAL or done == total:
                last[0] = now
                self.volumes.update_volume(
                    volume['id'], migration_progress=round(
                        100.0 * done / total, 1) if total else 100.0)

        began = time.monotonic()
        copy_mod.copy(volume['path'], dst['path'], chunk,
                      max_bytes_per_second, progress)
        self.volumes.update_volume(
            volume['id'], migration_copy_seconds=round(
                time.monotonic() - began, 3))
        # src is frozen since start, so the two must agree exactly.
        src_sum = copy_mod.sha256(volume['path'], chunk)
        dst_sum = copy_mod.sha256(dst['path'], chunk)
        if src_sum != dst_sum:
            raise exception.ChecksumMismatch(volume_id=volume['id'],
                                             src=src_sum, dst=dst_sum)
        self.volumes.update_volume(volume['id'], migration_checksum=src_sum)
        LOG.info('Copy of volume %s verified: sha256 %s', volume['id'],
                 src_sum)

    def _adopt(self, volume_id: str, dst: dict, started: list) -> str:
        """dst carries the volume's id from now on; returns src's path."""
        with self.volumes.records() as records:
            volume = records['volumes'][volume_id]
            target = records['volumes'].pop(dst['id'])
            src_path = volume['path']
            volume.update(path=target['path'], pool=target['pool'],
                          migration_status='success',
                          migration_progress=100.0)
            for attachment in records['attachments'].values():
                if attachment['volume_id'] == dst['id']:
                    attachment['volume_id'] = volume_id
            for migration in started:
                records['attachments'].pop(migration['src_attachment_id'],
                                           None)
        return src_path

    def _abandon(self, ctxt, volume_id, dst, started, reason) -> None:
        """Cancel what started and drop dst; the volume stays on src."""
        for migration in started:
            try:
                self.client.cancel(ctxt, migration['src_attachment_id'])
                self.client.wait_for(ctxt, migration['id'],
                                     {states.CANCELLED, states.ERROR})
            except Exception:
                LOG.exception('Could not cancel volume migration %s',
                              migration['id'])
        if dst is not None:
            with self.volumes.records() as records:
                records['volumes'].pop(dst['id'], None)
                for attachment_id, attachment in list(
                        records['attachments'].items()):
                    if attachment['volume_id'] == dst['id']:
                        del records['attachments'][attachment_id]
            if os.path.exists(dst['path']):
                os.unlink(dst['path'])
        self.volumes.update_volume(volume_id, migration_status='error',
                                   migration_error=exception.safe_message(reason))

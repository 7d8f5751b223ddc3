"""Server side of volmig-volume's RPC API (client:
``volmig.volume_service.rpcapi``).

A method marked ``unsigned`` is one the previous release's conductor
calls (its block-storage adapter): it serves it unsigned while an upgrade
lets such messages in (``[signing] allow_unsigned``). Creating, deleting
and moving volumes is asked by volmig-api and volmig-manage, which are
upgraded no later than the conductors.
"""

import json
import os

from oslo_log import log as logging
import oslo_messaging as messaging

from volmig import exception
from volmig import rpc
from volmig import states
from volmig.conf import CONF
from volmig.volume_service import drain
from volmig.volume_service import pool_moves
from volmig.volume_service import records
from volmig.volume_service import rpcapi

LOG = logging.getLogger(__name__)
# A volume's data is its guest's: the service and its group (the agents
# of the hosts that mount the pool) read it, no one else.
VOLUME_MODE = 0o640
POOL_MODE = 0o750


class FileVolumes(records.VolumeRecords):
    """Records of volumes that are raw files in pool directories."""

    def connection_info(self, volume, attachment):
        return {'driver_volume_type': 'file',
                'data': {'path': volume['path'],
                         'volume_id': volume['id'],
                         'access_mode': attachment['attach_mode']}}

    def create_file_volume(self, ctxt, size_mb, pool, pool_dir,
                           **values) -> dict:
        # Files are sparse, so the check is against what the pool's file
        # system could ever hold, not what is free now.
        stat = os.statvfs(pool_dir)
        capacity_mb = stat.f_blocks * stat.f_frsize // (1024 * 1024)
        if size_mb > capacity_mb:
            raise exception.VolumeTooLarge(size_mb=size_mb, pool=pool,
                                           capacity_mb=capacity_mb)
        volume = self.create_volume(ctxt, size_mb, pool=pool, **values)
        path = os.path.join(pool_dir, 'volume-%s' % volume['id'])
        try:
            # Group-readable at most: a guest's data is its owner's.
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT
                                   | os.O_EXCL, VOLUME_MODE), 'wb') as handle:
                handle.truncate(size_mb * 1024 * 1024)
        except Exception:
            if os.path.exists(path):
                os.unlink(path)
            self.delete_volume(ctxt, volume['id'])
            raise
        return self.update_volume(volume['id'], path=path)

    def import_file(self, path: str) -> None:
        """Bring in the records of a release that kept them in a JSON
        file, once: the file is renamed when they are in."""
        try:
            with open(path) as state_file:
                saved = json.load(state_file)
        except FileNotFoundError:
            return
        self.restore(saved['volumes'].values(),
                     saved['attachments'].values())
        os.rename(path, path + '.imported')
        LOG.warning('Imported %d volume(s) and %d attachment(s) from %s '
                    'into the database; renamed it to %s.imported',
                    len(saved['volumes']), len(saved['attachments']), path,
                    path)


class VolumeManager:
    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, host: str):
        self.host = host
        self.volumes = FileVolumes()
        self.mover = pool_moves.Mover(self.volumes, CONF)
        self.drainer = drain.Drainer(self.volumes, self.mover, host)
        self.mover.on_end = self.drainer.run_once

    # Service plumbing.

    def service_record(self) -> tuple[str, dict]:
        return rpcapi.RPC_API_VERSION, {
            'pools': sorted(CONF.storage.pools)}

    def periodic_tasks(self):
        return [(CONF.report_interval, self.mover.resume_after_restart),
                (CONF.storage.drain_interval, self._queues)]

    def _queues(self) -> None:
        # Not before the migrations a restart cut off are taken back.
        if self.mover.resumed:
            self.mover.settle_failed()
            self.mover.start_queued()
            self.drainer.run_once()

    def init_host(self) -> None:
        for pool_dir in CONF.storage.pools.values():
            os.makedirs(pool_dir, exist_ok=True)
            os.chmod(pool_dir, POOL_MODE)
        self.volumes.import_file(CONF.storage.state_file)
        self.mover.find_interrupted()

    def cleanup_host(self) -> None:
        self.mover.stop()

    # Volumes.

    @rpc.endpoint
    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None):
        if not isinstance(size_mb, int) or size_mb < 1:
            raise exception.InvalidInput(
                field='size_mb',
                reason='expected a positive integer, not %r' % (size_mb,))
        pool = pool or min(CONF.storage.pools, default=None)
        if pool is None:
            raise exception.PoolNotFound(pool='(none configured)')
        volume = self.volumes.create_file_volume(
            ctxt, size_mb, pool, self.mover.pool_path(pool), name=name,
            multiattach=multiattach)
        LOG.info('Created volume %s (%d MiB) in pool %s', volume['id'],
                 size_mb, pool)
        return volume

    @rpc.endpoint(unsigned=True)
    def get_volume(self, ctxt, volume_id):
        return self.volumes.get_volume(ctxt, volume_id)

    @rpc.endpoint
    def list_volumes(self, ctxt, limit=None, marker=None):
        return self.volumes.list_volumes(ctxt, limit=limit, marker=marker)

    @rpc.endpoint
    def list_pools(self, ctxt):
        return [{'name': name, 'path': path}
                for name, path in sorted(CONF.storage.pools.items())]

    @rpc.endpoint
    def delete_volume(self, ctxt, volume_id):
        volume = self.volumes.get_volume(ctxt, volume_id)
        if volume.get('migration_status') in states.POOL_MOVE_UNDER_WAY:
            raise exception.MigrationInProgress(
                what='volume %s' % volume_id, reason='it is migrating')
        volume = self.volumes.delete_volume(ctxt, volume_id)
        if os.path.exists(volume['path']):
            os.unlink(volume['path'])

    @rpc.endpoint
    def migrate_volume(self, ctxt, volume_id, pool, max_bandwidth_mbps=None):
        return self.mover.begin(ctxt, volume_id, pool, max_bandwidth_mbps)

    # Pools.

    @rpc.endpoint
    def drain_pool(self, ctxt, pool, target_pool, max_parallel=1,
                   max_bandwidth_mbps=None, dry_run=False):
        return self.drainer.drain(ctxt, pool, target_pool, max_parallel,
                                  max_bandwidth_mbps, dry_run)

    @rpc.endpoint
    def pool_drain_get(self, ctxt, pool):
        return self.drainer.show(ctxt, pool)

    @rpc.endpoint
    def pool_drain_list(self, ctxt, pool, limit=None, marker=None):
        return self.drainer.history(ctxt, pool, limit, marker)

    @rpc.endpoint
    def pool_drain_cancel(self, ctxt, pool):
        return self.drainer.cancel(ctxt, pool)

    # Attachments.

    @rpc.endpoint(unsigned=True)
    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        return self.volumes.attachment_create(ctxt, volume_id, instance_uuid,
                                              mode)

    @rpc.endpoint(unsigned=True)
    def attachment_get(self, ctxt, attachment_id):
        return self.volumes.attachment_get(ctxt, attachment_id)

    @rpc.endpoint(unsigned=True)
    def attachment_update(self, ctxt, attachment_id, connector):
        return self.volumes.attachment_update(ctxt, attachment_id, connector)

    @rpc.endpoint(unsigned=True)
    def attachment_complete(self, ctxt, attachment_id):
        return self.volumes.attachment_complete(ctxt, attachment_id)

    @rpc.endpoint(unsigned=True)
    def attachment_delete(self, ctxt, attachment_id):
        return self.volumes.attachment_delete(ctxt, attachment_id)

"""Client side of volmig-volume's RPC API (server:
``volmig.volume_service.manager``).

The ``file`` block-storage adapter (``volmig.block_storage.file``) is this
client.

API version history:

    1.0 - Initial version.
    1.1 - drain_pool, pool_drain_get, pool_drain_cancel.
    1.2 - list_volumes takes limit and marker: a page of the volumes.
    1.3 - pool_drain_list: a page of a pool's drains.
"""

from volmig import rpc

TOPIC = 'volmig-volume'
RPC_API_VERSION = '1.3'
DRAIN_VERSION = '1.1'
PAGES_VERSION = '1.2'
DRAINS_VERSION = '1.3'


class StorageAPI:

    def __init__(self):
        self._client = rpc.get_client(TOPIC, RPC_API_VERSION)

    def _call(self, ctxt, method, version='1.0', **kwargs):
        return self._client.prepare(version=version).call(ctxt, method,
                                                          **kwargs)

    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None):
        return self._call(ctxt, 'create_volume', size_mb=size_mb, name=name,
                          multiattach=multiattach, pool=pool)

    def get_volume(self, ctxt, volume_id):
        return self._call(ctxt, 'get_volume', volume_id=volume_id)

    def list_volumes(self, ctxt, limit=None, marker=None):
        if limit is None and marker is None:
            return self._call(ctxt, 'list_volumes')
        return self._call(ctxt, 'list_volumes', version=PAGES_VERSION,
                          limit=limit, marker=marker)

    def list_pools(self, ctxt) -> list[dict]:
        return self._call(ctxt, 'list_pools')

    def delete_volume(self, ctxt, volume_id):
        return self._call(ctxt, 'delete_volume', volume_id=volume_id)

    def migrate_volume(self, ctxt, volume_id: str, pool: str,
                       max_bandwidth_mbps: int | None = None) -> dict:
        """Start moving a volume to another pool.

        Returns once every attachment has started (a refusal comes back
        as the start's error); the copy and the complete go on in the
        background. Watch the volume's ``migration_status``.
        """
        return self._call(ctxt, 'migrate_volume', volume_id=volume_id,
                          pool=pool, max_bandwidth_mbps=max_bandwidth_mbps)

    def drain_pool(self, ctxt, pool: str, target_pool: str,
                   max_parallel: int = 1,
                   max_bandwidth_mbps: int | None = None,
                   dry_run: bool = False) -> dict:
        """Move every volume out of ``pool``; see ``storage.drain``."""
        return self._call(ctxt, 'drain_pool', version=DRAIN_VERSION,
                          pool=pool, target_pool=target_pool,
                          max_parallel=max_parallel,
                          max_bandwidth_mbps=max_bandwidth_mbps,
                          dry_run=dry_run)

    def pool_drain_get(self, ctxt, pool: str) -> dict:
        return self._call(ctxt, 'pool_drain_get', version=DRAIN_VERSION,
                          pool=pool)

    def pool_drain_list(self, ctxt, pool: str, limit: int | None = None,
                        marker: str | None = None) -> list[dict]:
        return self._call(ctxt, 'pool_drain_list', version=DRAINS_VERSION,
                          pool=pool, limit=limit, marker=marker)

    def pool_drain_cancel(self, ctxt, pool: str) -> dict:
        return self._call(ctxt, 'pool_drain_cancel', version=DRAIN_VERSION,
                          pool=pool)

    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        return self._call(ctxt, 'attachment_create', volume_id=volume_id,
                          instance_uuid=instance_uuid, mode=mode)

    def attachment_get(self, ctxt, attachment_id):
        return self._call(ctxt, 'attachment_get', attachment_id=attachment_id)

    def attachment_update(self, ctxt, attachment_id, connector):
        return self._call(ctxt, 'attachment_update',
                          attachment_id=attachment_id, connector=connector)

    def attachment_complete(self, ctxt, attachment_id):
        return self._call(ctxt, 'attachment_complete',
                          attachment_id=attachment_id)

    def attachment_delete(self, ctxt, attachment_id):
        return self._call(ctxt, 'attachment_delete',
                          attachment_id=attachment_id)

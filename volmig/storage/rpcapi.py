"""Client side of volmig-volume's RPC API (server: ``storage.manager``).

The ``file`` block-storage adapter (``volume.file``) is this client.

API version history:

    1.0 - Initial version.
"""

from volmig import rpc

TOPIC = 'volmig-volume'
RPC_API_VERSION = '1.0'


class StorageAPI:

    def __init__(self):
        self._client = rpc.get_client(TOPIC, RPC_API_VERSION)

    def _call(self, ctxt, method, **kwargs):
        return self._client.prepare(version='1.0').call(ctxt, method,
                                                        **kwargs)

    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None):
        return self._call(ctxt, 'create_volume', size_mb=size_mb, name=name,
                          multiattach=multiattach, pool=pool)

    def get_volume(self, ctxt, volume_id):
        return self._call(ctxt, 'get_volume', volume_id=volume_id)

    def list_volumes(self, ctxt):
        return self._call(ctxt, 'list_volumes')

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

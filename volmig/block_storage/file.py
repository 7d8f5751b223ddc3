"""The ``file`` backend: volmig-volume, through its RPC client."""

import copy

from volmig.block_storage import base
from volmig.volume_service import records
from volmig.volume_service import rpcapi


class FileVolumeAdapter(rpcapi.StorageAPI, base.VolumeAdapter):

    def __init__(self, conf=None):
        super().__init__()
        self._records: records.VolumeRecords | None = None

    def with_database(self) -> 'FileVolumeAdapter':
        """Reads volumes and attachments where volmig-volume keeps them,
        in volmig's database, rather than asking volmig-volume: the
        conductor then makes no call for a read from inside a start or a
        complete that volmig-volume itself may be waiting on. Every change
        still goes through volmig-volume, which owns the records."""
        local = copy.copy(self)
        local._records = records.VolumeRecords()
        return local

    def _reads(self):
        """Where a read goes: the records, or volmig-volume."""
        return self._records if self._records is not None else super()

    def get_volume(self, ctxt, volume_id):
        return self._reads().get_volume(ctxt, volume_id)

    def attachment_get(self, ctxt, attachment_id):
        return self._reads().attachment_get(ctxt, attachment_id)

    def volume_size_mb(self, ctxt, volume_id):
        return self._reads().volume_size_mb(ctxt, volume_id)

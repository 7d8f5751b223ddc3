"""The ``file`` backend: volmig-volume, through its RPC client."""

from volmig.block_storage import base
from volmig.volume_service import rpcapi


class FileVolumeAdapter(rpcapi.StorageAPI, base.VolumeAdapter):

    def __init__(self, conf=None):
        super().__init__()

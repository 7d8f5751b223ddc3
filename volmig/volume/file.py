"""The ``file`` backend: volmig-volume, through its RPC client."""

from volmig.storage import rpcapi
from volmig.volume import base


class FileVolumeAdapter(rpcapi.StorageAPI, base.VolumeAdapter):

    def __init__(self, conf=None):
        super().__init__()

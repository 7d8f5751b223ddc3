"""A block-storage backend without data, for the fake compute driver.

Its records are volmig-volume's (``volmig.volume_service.records``), in the
database every service of a deployment shares, so the conductor, the API
and a test playing the block-storage service see the same volumes.
"""

from volmig.block_storage import base
from volmig.volume_service import records


class FakeVolumeAdapter(records.VolumeRecords, base.VolumeAdapter):

    def __init__(self, conf=None):
        pass

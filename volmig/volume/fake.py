"""A block-storage backend without data, for the fake compute driver.

Its records live in a JSON file (``[volume] fake_state_file``), so the
conductor, the API and a test playing the block-storage service see the
same volumes when they run as separate processes on one host.
"""

from volmig.volume import records


class FakeVolumeAdapter(records.VolumeRecords):

    def __init__(self, conf):
        super().__init__(conf.volume.fake_state_file)

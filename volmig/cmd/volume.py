"""volmig-volume: the embedded block-storage service.

Volumes are raw files in the pools of ``[storage] pools``.
"""

import sys

from volmig import config
from volmig import service


def main() -> None:
    config.parse_args(sys.argv[1:])
    service.serve(lambda: service.Service(service.VOLUME))

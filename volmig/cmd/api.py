"""volmig-api: the RPC face for block-storage services."""

import sys

from volmig import config
from volmig import service


def main() -> None:
    config.parse_args(sys.argv[1:])
    service.serve(service.Service(service.API))

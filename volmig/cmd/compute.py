"""volmig-compute: the agent that drives the guests on one host."""

import sys

from volmig import config
from volmig import service


def main() -> None:
    config.parse_args(sys.argv[1:])
    service.serve(lambda: service.Service(service.COMPUTE))

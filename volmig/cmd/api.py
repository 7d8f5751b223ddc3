"""volmig-api: the REST API and the RPC face for block-storage services."""

import sys

from volmig import config
from volmig import service
from volmig.api import http


def main() -> None:
    config.parse_args(sys.argv[1:])
    # The REST API listens before the RPC face starts, so its "is ready"
    # line (after the first heartbeat) means that both serve: building
    # the WSGI app took long enough under load for a client that waited
    # for that line to find the port closed.
    service.serve(lambda: service.ServiceGroup([
        http.HTTPService(), service.Service(service.API)]))

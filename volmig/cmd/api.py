"""volmig-api: the REST API and the RPC face for block-storage services."""

import sys

from volmig import config
from volmig import service
from volmig.api import http


def main() -> None:
    config.parse_args(sys.argv[1:])
    service.serve(lambda: service.ServiceGroup([
        service.Service(service.API), http.HTTPService()]))

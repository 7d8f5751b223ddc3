"""volmig-compute: the agent that drives the guests on one host."""

import sys

from volmig import config
from volmig import service
from volmig import signing
from volmig.conf import CONF


def main() -> None:
    config.parse_args(sys.argv[1:])
    # Its own key: a host's, never the controllers'.
    service.serve(lambda: service.Service(service.COMPUTE),
                  identity=(signing.COMPUTE, CONF.host))

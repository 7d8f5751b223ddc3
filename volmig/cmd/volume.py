"""volmig-volume: the embedded block-storage service.

Volumes are raw files in the pools of ``[storage] pools``.
"""

import sys

from volmig import config
from volmig import service
from volmig import signing
from volmig.conf import CONF


def main() -> None:
    config.parse_args(sys.argv[1:])
    # Its own key: a host's, never the controllers'.
    service.serve(lambda: service.Service(service.VOLUME),
                  identity=(signing.VOLUME, CONF.host))

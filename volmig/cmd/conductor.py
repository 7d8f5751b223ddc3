"""volmig-conductor: rules, state and healing.

It stands between the compute agents and the database.
"""

import sys

from volmig import config
from volmig import service


def main() -> None:
    config.parse_args(sys.argv[1:])
    service.serve(lambda: service.Service(service.CONDUCTOR))

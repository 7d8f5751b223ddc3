"""The embedded default: api, conductor and compute agents in one process.

SQLite and the state live under one directory; the transport is
``fake://`` unless a RabbitMQ URL is given.
"""

import os

from volmig import service
from volmig.conf import CONF
from volmig.db import api as db_api
from volmig.db import migration


def configure(state_dir: str, driver: str, transport_url: str) -> None:
    state_dir = os.path.abspath(state_dir)
    os.makedirs(state_dir, exist_ok=True)
    CONF.set_override('state_path', state_dir)
    CONF.set_override('transport_url', transport_url)
    CONF.set_override('driver', driver, group='compute')
    db_api.configure(CONF.database.connection)
    migration.upgrade()


def compute_hosts(count: int) -> list[str]:
    return ['compute-%d' % number for number in range(1, count + 1)]


def build(computes: int) -> service.ServiceGroup:
    members = [service.Service(service.CONDUCTOR),
               service.Service(service.API)]
    members += [service.Service(service.COMPUTE, host=host)
                for host in compute_hosts(computes)]
    return service.ServiceGroup(members)

"""Policy defaults in code, one module per resource."""

import itertools

from volmig.policies import base
from volmig.policies import volume_migrations


def list_rules():
    return itertools.chain(base.list_rules(), volume_migrations.list_rules())

"""Policy defaults in code, one module per resource."""

import itertools

from volmig.policies import attachments
from volmig.policies import base
from volmig.policies import metrics
from volmig.policies import servers
from volmig.policies import services
from volmig.policies import volume_migrations
from volmig.policies import volume_pools
from volmig.policies import volumes


def list_rules():
    return itertools.chain(*(module.list_rules() for module in (
        base, servers, attachments, volumes, volume_migrations, volume_pools,
        services, metrics)))

"""volmig's configuration: one module per option group.

Nothing registers at import; ``register_opts`` is called by
``volmig.config.parse_args`` and by the test fixtures.
"""

from oslo_config import cfg

from volmig.conf import api
from volmig.conf import cinder
from volmig.conf import compute
from volmig.conf import conductor
from volmig.conf import database
from volmig.conf import default
from volmig.conf import fake_driver
from volmig.conf import libvirt
from volmig.conf import metrics
from volmig.conf import nova
from volmig.conf import qemu
from volmig.conf import signing
from volmig.conf import storage
from volmig.conf import upgrade_levels
from volmig.conf import volume

CONF = cfg.CONF

MODULES = (default, api, cinder, compute, conductor, database, fake_driver,
           libvirt, metrics, nova, qemu, signing, storage,
           upgrade_levels, volume)


def register_opts(conf: cfg.ConfigOpts) -> None:
    for module in MODULES:
        module.register_opts(conf)

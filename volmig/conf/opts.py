"""Collects every volmig option group for oslo-config-generator."""

from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_db import options as db_options
from oslo_log import log as logging
from oslo_middleware.healthcheck import opts as healthcheck_opts

from volmig import conf
from volmig.conf import database

# The checks behind GET /healthcheck (volmig.api.health), by the names of
# their entry points (setup.cfg).
HEALTHCHECK_BACKENDS = ['volmig_database', 'volmig_messaging']


def list_opts():
    groups: dict = {}
    for module in conf.MODULES:
        for group, opts in module.list_opts():
            key = group.name if group is not None else 'DEFAULT'
            groups.setdefault(key, []).extend(opts)
    return sorted(groups.items())


def set_defaults(conf=None):
    """Defaults volmig sets on library options (also for the generator)."""
    cfg.set_defaults(db_options.database_opts,
                     connection=database.DEFAULT_CONNECTION,
                     max_pool_size=database.MAX_POOL_SIZE)
    cfg.set_defaults(healthcheck_opts.HEALTHCHECK_OPTS,
                     backends=HEALTHCHECK_BACKENDS)
    # oslo.messaging's queue manager, which names each process's reply
    # queue after its host (volmig.rpc.name_queues), counts them under a
    # lock between processes.
    lockutils.set_defaults(lock_path='$state_path/lock')
    # os-brick's connector probes every protocol it knows on each agent
    # and warns about those the host lacks (iSCSI, NVMe-oF); volmig
    # connects nfs and local only, and refuses the rest by name.
    logging.set_defaults(default_log_levels=logging.get_default_log_levels()
                         + ['qemu.qmp=WARNING',
                            'os_brick.initiator.connectors.iscsi=ERROR',
                            'os_brick.initiator.connectors.nvmeof=ERROR',
                            'os_brick.privileged.nvmeof=ERROR'])

"""Parses the command line and config files for every volmig binary."""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging import opts as messaging_opts
from oslo_reports import opts as reports_opts

from volmig import conf as volmig_conf
from volmig import rpc
from volmig.conf import CONF
from volmig.conf import opts
from volmig.db import api as db_api

# Without a prefetch limit a server reads the whole backlog before it
# dispatches anything (doc/source/design.rst, "Messaging").
RABBIT_PREFETCH = 10


def register_opts(conf=CONF) -> None:
    volmig_conf.register_opts(conf)
    logging.register_options(conf)
    reports_opts.set_defaults(conf)
    messaging.set_transport_defaults(rpc.EXCHANGE)
    # oslo.messaging registers these lazily; volmig sets defaults on them
    # (and tests override them) before any transport exists.
    for group, group_opts in messaging_opts.list_opts():
        if group in (None, 'oslo_messaging_rabbit',
                     'oslo_messaging_notifications'):
            conf.register_opts(group_opts, group=group)
    conf.set_default('rabbit_qos_prefetch_count', RABBIT_PREFETCH,
                     group='oslo_messaging_rabbit')


def parse_args(argv: list[str], conf=CONF, default_config_files=None,
               setup_logging: bool = True) -> None:
    register_opts(conf)
    opts.set_defaults(conf)
    conf(argv, project='volmig', default_config_files=default_config_files)
    if setup_logging:
        logging.setup(conf, 'volmig')
    db_api.configure(conf.database.connection)

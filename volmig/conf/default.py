import socket

from oslo_config import cfg

concurrency_opts = [
    cfg.StrOpt('concurrency_backend', default='threading',
               choices=[('threading', 'Native threads (oslo.service '
                         'threading backend and futurist). The default.'),
                        ('eventlet', 'Green threads. Deprecated upstream; '
                         'kept as an opt-in.')],
               help='How the services run concurrent work. Read before any '
                    'other module is imported, so it can only be set in a '
                    'configuration file, not changed at run time.'),
]

service_opts = [
    cfg.StrOpt('host', default=socket.gethostname(), sample_default='<host>',
               help='Name of this host. Compute agents use it as their RPC '
                    'server name; instances are scheduled to it.'),
    cfg.StrOpt('state_path', default='/var/lib/volmig',
               help='Top-level directory for volmig\'s state.'),
    cfg.IntOpt('report_interval', default=10, min=1,
               help='Seconds between service heartbeats.'),
    cfg.IntOpt('service_down_time', default=60, min=1,
               help='Seconds after the last heartbeat at which a service is '
                    'considered down. Work on a down compute agent is '
                    'failed by the conductor.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(concurrency_opts)
    conf.register_opts(service_opts)


def list_opts():
    return [(None, concurrency_opts + service_opts)]

from oslo_config import cfg

metrics_group = cfg.OptGroup('metrics', title='Prometheus metrics')

metrics_opts = [
    cfg.PortOpt('port', default=0,
                help='Port of this service\'s own /metrics (Prometheus), on '
                     '[metrics] listen; 0 serves none.'),
    cfg.HostAddressOpt('listen', default='127.0.0.1',
                       help='Address of this service\'s /metrics.'),
    cfg.StrOpt('api_access', default='open',
               choices=[('open', 'anyone who reaches the API'),
                        ('token', 'a token that policy volmig:metrics '
                                  'allows (admin by default)'),
                        ('off', 'not on the API port: use [metrics] port '
                                'and listen instead')],
               help="Who may read volmig-api's /metrics on its REST port: "
                    "the count of migrations by status for the whole cloud, "
                    "and the API's request and error counters."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(metrics_group)
    conf.register_opts(metrics_opts, group=metrics_group)


def list_opts():
    return [(metrics_group, metrics_opts)]

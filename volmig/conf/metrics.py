from oslo_config import cfg

metrics_group = cfg.OptGroup('metrics', title='Prometheus metrics')

metrics_opts = [
    cfg.PortOpt('port', default=0,
                help='Port of this service\'s own /metrics (Prometheus), on '
                     '[metrics] listen; 0 serves none. volmig-api serves '
                     '/metrics on its REST port as well.'),
    cfg.HostAddressOpt('listen', default='127.0.0.1',
                       help='Address of this service\'s /metrics.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(metrics_group)
    conf.register_opts(metrics_opts, group=metrics_group)


def list_opts():
    return [(metrics_group, metrics_opts)]

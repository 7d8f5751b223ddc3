from oslo_config import cfg

fake_driver_group = cfg.OptGroup('fake_driver',
                                 title='Options of the fake compute driver')

fake_driver_opts = [
    cfg.BoolOpt('offline_only', default=False,
                help='Behave as a driver that cannot migrate a running '
                     'guest\'s volume: migrations need the guest shut off.'),
    cfg.FloatOpt('job_seconds', default=0.0, min=0,
                 help='How long each commit or cancel job takes, moving '
                      'job_bytes at an even rate; 0 finishes at once. For '
                      'scale tests of progress reporting.'),
    cfg.IntOpt('job_bytes', default=1024 ** 3, min=1,
               help='The size a simulated job copies.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(fake_driver_group)
    conf.register_opts(fake_driver_opts, group=fake_driver_group)


def list_opts():
    return [(fake_driver_group, fake_driver_opts)]

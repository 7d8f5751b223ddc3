"""``[volmig]`` in cinder.conf: how cinder-volume reaches volmig."""

from oslo_config import cfg

GROUP = 'volmig'
volmig_group = cfg.OptGroup(GROUP, title='volmig, for cinder-volume')

volmig_opts = [
    cfg.StrOpt('transport_url', secret=True,
               help="volmig's RabbitMQ (an oslo.messaging transport URL), "
                    "where volmig-api answers the migration client. "
                    "Cinder's own transport_url when unset. Its user "
                    "needs to publish to volmig-api's topic only."),
    cfg.IntOpt('timeout', default=600, min=1,
               help='Seconds to wait for each step volmig runs for a '
                    'migration: an attachment to start (it may wait for a '
                    'slot under volmig\'s caps), to switch onto the new '
                    'volume, or to go back to the old one.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(volmig_group)
    conf.register_opts(volmig_opts, group=volmig_group)


def list_opts():
    # cinder.conf's [signing] is volmig's own group (volmig.conf.signing),
    # which volmig.client registers on Cinder's configuration.
    return [(volmig_group, volmig_opts)]

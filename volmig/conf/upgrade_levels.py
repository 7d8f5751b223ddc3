from oslo_config import cfg

upgrade_group = cfg.OptGroup('upgrade_levels',
                             title='RPC version caps for rolling upgrades')

upgrade_opts = [
    cfg.StrOpt('compute', default='auto',
               help='Cap on the compute RPC API version sent to agents: an '
                    'RPC version such as "1.0", a release alias, or "auto" '
                    '(the lowest version any registered compute agent '
                    'announces).'),
    cfg.StrOpt('conductor', default='auto',
               help='Cap on the conductor RPC API version that agents and '
                    'APIs send: an RPC version, a release alias, or "auto" '
                    '(the lowest version any registered conductor '
                    'announces). Set it to the old release while conductors '
                    'are upgraded after the agents.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(upgrade_group)
    conf.register_opts(upgrade_opts, group=upgrade_group)


def list_opts():
    return [(upgrade_group, upgrade_opts)]

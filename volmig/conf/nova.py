"""``[nova]``: how volmig reaches Nova, to move the volumes of Nova's
servers when it drains a Cinder backend.

keystoneauth1's own options, as ``[cinder]`` has them; the user needs
Nova's admin role (to lock and unlock any project's server). The
commands are ``nova-manage``'s, which only Nova's own configuration can
run: volmig runs them as an operator sets them here (locally, or through
ssh to a host that has nova.conf).
"""

from oslo_config import cfg

from volmig.conf import cinder

GROUP = 'nova'
nova_group = cfg.OptGroup(GROUP, title="Nova, whose servers' volumes "
                                       'a drain moves')

nova_opts = [
    cfg.ListOpt('manage_command', default=['nova-manage'],
                help='The command that runs nova-manage with nova.conf '
                     '(its API and cell databases and the bus), as a list '
                     'of words: for example "nova-manage,--config-file,'
                     '/etc/nova/nova.conf", or "ssh,controller-1,'
                     'nova-manage". volmig runs "volume_attachment '
                     'refresh" through it to bring a stopped server\'s '
                     'record to a volume that Cinder moved.'),
    cfg.ListOpt('connector_command',
                default=['nova-manage', 'volume_attachment',
                         'get_connector', '--json'],
                help='The command that prints, as JSON, the os-brick '
                     'connector of the compute host "{host}" (the '
                     'server\'s): it must run on that host, as "ssh,'
                     '{host},nova-manage,volume_attachment,get_connector,'
                     '--json" does. The default runs here, for a compute '
                     'host that is this one.'),
    cfg.IntOpt('command_timeout', default=300, min=1,
               help='Seconds a nova-manage command may take.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(nova_group)
    conf.register_opts(nova_opts, group=nova_group)
    cinder.register_keystoneauth(conf, GROUP, 'compute')


def list_opts():
    return [(nova_group, cinder.keystoneauth_options(nova_opts))]

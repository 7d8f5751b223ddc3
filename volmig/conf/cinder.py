"""``[cinder]``: how volmig reaches Cinder when ``[volume] backend`` is
``cinder``.

keystoneauth1's own options, as Nova's ``[cinder]`` has them: an auth
plugin (``password``, ``v3applicationcredential``, ... or ``none`` /
``admin_token`` with ``endpoint_override``), the session's TLS and
timeouts, and where to find the endpoint in the catalog.
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

GROUP = 'cinder'
cinder_group = cfg.OptGroup(GROUP, title='Cinder, as block storage')

cinder_opts = [
    cfg.BoolOpt('send_service_token', default=True,
                help='Send the token of these credentials as a service '
                     'token (X-Service-Token) too, as Nova does with '
                     '[service_user]. Cinder then knows its attachment '
                     'deletes come from the compute service, and does not '
                     'ask the compute API whether each attachment is still '
                     'in use. The user needs the service role. Ignored for '
                     'auth_type none.'),
]

def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(cinder_group)
    conf.register_opts(cinder_opts, group=cinder_group)
    register_keystoneauth(conf, GROUP, 'volumev3')


def register_keystoneauth(conf: cfg.ConfigOpts, group: str,
                          service_type: str) -> None:
    """keystoneauth1's session, auth and adapter options in ``group``,
    for the service of ``service_type``."""
    ks_loading.register_session_conf_options(conf, group)
    ks_loading.register_auth_conf_options(conf, group)
    ks_loading.register_adapter_conf_options(conf, group,
                                             include_deprecated=False)
    conf.set_default('service_type', service_type, group=group)


def list_opts():
    return [(cinder_group, keystoneauth_options(cinder_opts))]


def keystoneauth_options(own: list) -> list:
    """A group's ``own`` options and keystoneauth1's (the ``password``
    plugin's for the sample), each once: keystoneauth lists some twice."""
    seen: dict = {}
    for opt in (own + ks_loading.get_session_conf_options()
                + ks_loading.get_auth_common_conf_options()
                + ks_loading.get_auth_plugin_conf_options('password')
                + ks_loading.get_adapter_conf_options(
                    include_deprecated=False)):
        seen.setdefault(opt.dest, opt)
    return list(seen.values())

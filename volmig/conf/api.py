from oslo_config import cfg

api_group = cfg.OptGroup('api', title='REST API options')

api_opts = [
    cfg.StrOpt('auth_strategy', default='keystone',
               choices=[('keystone', 'Tokens are validated by Keystone '
                         '(keystonemiddleware; configure '
                         '[keystone_authtoken]).'),
                        ('noauth2', 'No authentication: the token '
                         '"USER:PROJECT" is believed, and the user "admin" '
                         'is an administrator. For tests and the embedded '
                         'default only.')],
               help='How REST requests are authenticated.'),
    # Listening on every address is what an API service is for.
    cfg.HostAddressOpt('listen', default='0.0.0.0',  # noqa: S104 # nosec
                       help='Address the REST API listens on.'),
    cfg.PortOpt('port', default=8788,
                help='Port the REST API listens on; 0 picks a free one.'),
    cfg.IntOpt('workers', default=16, min=1,
               help='Threads serving REST requests in volmig-api.'),
    cfg.IntOpt('backlog', default=4096, min=1,
               help='Connections the kernel holds for volmig-api while '
                    'every thread is busy (the listening socket\'s '
                    'backlog, capped by net.core.somaxconn). A burst of '
                    'new connections beyond it is reset unanswered '
                    '(measured: 34 of 64 at once, with a backlog of 5).'),
    cfg.IntOpt('max_limit', default=1000, min=1,
               help='The most items a REST list returns at once, as '
                    "Nova's: a request that asks for none or for more "
                    'gets this many, with a link to the next page.'),
    cfg.IntOpt('healthcheck_cache_seconds', default=5, min=0,
               help='How long /healthcheck answers with its last look at '
                    'RabbitMQ, which costs a connection of its own: probes '
                    'every second from several balancers then open one '
                    'connection per this many seconds. 0: look every '
                    'time.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)


def list_opts():
    return [(api_group, api_opts)]

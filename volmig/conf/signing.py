from oslo_config import cfg

signing_group = cfg.OptGroup(
    'signing', title='Signed RPC: every message bound to its sender',
    help='Each service signs what it sends with its own key (HMAC-SHA256), '
         'and each checks the signature, the sender and freshness before '
         'it serves a message. volmig-api, volmig-conductor and '
         'volmig-manage hold the master key; a compute host, volmig-volume '
         'and a block-storage client hold only a key derived for them '
         '("volmig-manage key export").')

signing_opts = [
    cfg.StrOpt('key_file',
               help='The key file: the master key (controllers) or this '
                    "service's own key. Unset: systemd's credential "
                    '"volmig-key" ($CREDENTIALS_DIRECTORY/volmig-key, from '
                    'the unit\'s LoadCredential=), else '
                    '/etc/volmig/key.json. A service with no key refuses '
                    'to start. The file is read again when it changes.'),
    cfg.IntOpt('max_age', default=300, min=10,
               help='Seconds a signed message stays acceptable after it '
                    'was sent (clocks must agree within this). Its nonce is '
                    'remembered as long, so a copy replayed to the same '
                    'process is refused. A cast queued for an agent that '
                    'is down for longer is refused when it arrives; the '
                    "conductor's reconciliation settles its migration."),
    cfg.BoolOpt('allow_unsigned', default=False,
                help='Serve messages that carry no signature: only while '
                     'services older than signing still run during a '
                     'rolling upgrade. Their senders are not known, so '
                     'nothing binds them to a host. Turn it off once every '
                     'service is upgraded. Signed messages are checked '
                     'either way.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(signing_group)
    conf.register_opts(signing_opts, group=signing_group)


def list_opts():
    return [(signing_group, signing_opts)]

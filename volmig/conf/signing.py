from oslo_config import cfg

signing_group = cfg.OptGroup(
    'signing', title='Signed RPC: every message bound to its sender',
    help='Each service seals what it sends, and each reply to a call, '
         '(HMAC-SHA256), and each checks the seal, the sender and '
         'freshness before it serves a message or takes a reply. '
         'volmig-api, volmig-conductor and volmig-manage hold the master '
         'key; every host (a compute host, a volmig-volume node, a '
         'block-storage client) holds a key of its own, derived for it and '
         'recorded in the database ("volmig-manage key export"), which '
         '"volmig-manage key revoke" ends.')

signing_opts = [
    cfg.StrOpt('key_file',
               help='The key file: the master key (controllers) or this '
                    "host's own key. Unset: systemd's credential "
                    '"volmig-key" ($CREDENTIALS_DIRECTORY/volmig-key, from '
                    'the unit\'s LoadCredential=), else '
                    '/etc/volmig/key.json. A service with no key, or with '
                    'a key of another kind or host, refuses to start. The '
                    'file is read again when it changes.'),
    cfg.IntOpt('max_age', default=300, min=10,
               help='Seconds a signed message stays acceptable after it '
                    'was sent (clocks must agree within this). Its nonce is '
                    'remembered as long, where every server of its topic '
                    'looks (the database; a compute agent\'s journal), so '
                    'a copy replayed to any of them, restarted or not, is '
                    'refused. A cast queued for an agent that is down for '
                    "longer is refused when it arrives; the conductor's "
                    'reconciliation settles its migration.'),
    cfg.BoolOpt('allow_unsigned', default=False,
                help='Serve messages that carry no signature, and take '
                     'unsealed replies: only while services older than '
                     'signing still run during a rolling upgrade. An '
                     'unsigned message may call only what the previous '
                     "release's agents, volmig-volume and block-storage "
                     'clients call, and what its conductor calls on '
                     'agents and volmig-volume, about hosts that hold no '
                     'key yet; never an operator\'s method. Turn it off '
                     'once every service is upgraded. Signed messages are '
                     'checked either way.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A group of its own for each ConfigOpts: oslo.config keeps a group's
    # values (overrides too) on the group object, so two configurations
    # given one group (volmig's and a block-storage service's own, in one
    # process) would share their keys.
    group = cfg.OptGroup(signing_group.name, title=signing_group.title,
                         help=signing_group.help)
    conf.register_group(group)
    conf.register_opts(signing_opts, group=group)


def list_opts():
    return [(signing_group, signing_opts)]

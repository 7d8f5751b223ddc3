"""volmig-manage's commands and their arguments, as oslo.config's
subcommand option parses them (``volmig.cmd.manage`` runs them)."""


def add_parsers(subparsers):
    db = subparsers.add_parser('db', help='Database schema.')
    db.add_argument('action', choices=['sync', 'version'],
                    help='sync: upgrade the schema; version: print it.')
    image = subparsers.add_parser(
        'image', help='Guest images in [qemu] image_dir (on each compute '
                      'host).')
    actions = image.add_subparsers(dest='action', required=True)
    register = actions.add_parser(
        'register', help='Copy a kernel (with an initramfs and a command '
                         'line) or a bootable disk in as an image.')
    # Not "name": that is the category's own, as oslo.config parses it.
    register.add_argument('image', metavar='name', help='The image name.')
    register.add_argument('--kernel', help='A Linux kernel to boot.')
    register.add_argument('--initrd', help='Its initramfs.')
    register.add_argument('--cmdline', help="The kernel's command line.")
    register.add_argument('--disk', help='A raw bootable disk, for volumes '
                                         'to be filled from.')
    actions.add_parser('list', help='List images.')
    delete = actions.add_parser('delete', help='Delete an image.')
    delete.add_argument('image', metavar='name', help='The image name.')

    vol = subparsers.add_parser('volume', help='Volumes of volmig-volume.')
    actions = vol.add_subparsers(dest='action', required=True)
    actions.add_parser('list', help='List volumes.')
    migrate = actions.add_parser('migrate',
                                 help='Move a volume to another pool.')
    # Not "volume": that is an option group's name, as oslo.config
    # parses it.
    migrate.add_argument('volume_id', metavar='volume',
                         help="The volume's id.")
    migrate.add_argument('--to', required=True, help='Destination pool.')
    migrate.add_argument('--max-bandwidth-mbps', type=int, default=None,
                         help='Copy bandwidth cap in MiB/s.')
    migrate.add_argument('--wait', action='store_true',
                         help='Show progress until it ends.')

    pool = subparsers.add_parser('pool', help='Pools of volmig-volume.')
    actions = pool.add_subparsers(dest='action', required=True)
    drain = actions.add_parser(
        'drain', help='Move every volume out of a pool, attached or not.')
    drain.add_argument('pool', help='The pool to empty.')
    drain.add_argument('--to', required=True, help='Destination pool.')
    drain.add_argument('--max-parallel', type=int, default=1,
                       help='Volumes moving at once.')
    drain.add_argument('--max-bandwidth-mbps', type=int, default=None,
                       help='Bandwidth cap of each copy in MiB/s.')
    drain.add_argument('--dry-run', action='store_true',
                       help='Print the plan and its reasons only.')
    drain.add_argument('--wait', action='store_true',
                       help='Show progress until the drain ends.')
    for name, text in (('show', "Show a pool's latest drain."),
                       ('cancel-drain', 'Begin no more volumes of the '
                                        "pool's drain.")):
        actions.add_parser(name, help=text).add_argument(
            'pool', help="The pool's name.")

    mig = subparsers.add_parser('migration', help='Volume migrations.')
    actions = mig.add_subparsers(dest='action', required=True)
    listing = actions.add_parser('list', help='List volume migrations.')
    listing.add_argument('--status', help='Only migrations in it.')
    # Not "host": that name is oslo.config's own option.
    listing.add_argument('--host', dest='on_host',
                         help="Only those of this compute host's servers.")
    for name, text in (
            ('show', 'Show a migration, its phase and error.'),
            ('abort', 'Send the guest back to src while src is whole.'),
            ('recover', 'Finish a stuck migration, or the recovery of a '
                        'failed one.')):
        action = actions.add_parser(name, help=text)
        action.add_argument('migration', help='Its id.')
        if name == 'recover':
            action.add_argument(
                '--to', choices=['src', 'dst'], default=None,
                help='Only when the agent\'s host is lost: the volume the '
                     'server keeps.')

    svc = subparsers.add_parser(
        'service', help='Service records (heartbeats) of every host.')
    actions = svc.add_subparsers(dest='action', required=True)
    actions.add_parser('list', help='List services, up or down.')
    for name, text in (
            ('disable', 'A disabled compute host takes no new servers.'),
            ('enable', 'Take new servers again.'),
            ('delete', 'Forget a service that is down for good (a compute '
                       'host must have no servers left).')):
        action = actions.add_parser(name, help=text)
        action.add_argument('binary', help='e.g. volmig-compute')
        action.add_argument('on_host', metavar='host',
                            help='Its host name.')
        if name == 'disable':
            action.add_argument('--reason', default=None,
                                help='Why, shown with the service.')

    key = subparsers.add_parser(
        'key', help="RPC signing keys ([signing] key_file): the master key "
                    "on the controllers, and each host's own.")
    actions = key.add_subparsers(dest='action', required=True)
    actions.add_parser('create', help='Write a new master key.').add_argument(
        '--to', default=None, help='Where (default: [signing] key_file).')
    actions.add_parser(
        'rotate', help='Add a master key that signs after the window; the '
                       'old ones are accepted for another window.'
    ).add_argument('--window', type=int, default=3600,
                   help='Seconds to copy the new keys to every service.')
    export = actions.add_parser(
        'export', help="Write a host's own key, derived from the master key "
                       'for it, and record it: a new key, unless '
                       '--same-generation; the one the host had before is '
                       'refused from then on.')
    revoke = actions.add_parser(
        'revoke', help="Forget a host's key: its messages are refused "
                       'within a second, and messages to it cannot be sealed.')
    for action in (export, revoke):
        action.add_argument('--service', required=True,
                            choices=['volmig-compute', 'volmig-volume',
                                     'volmig-client'],
                            help='volmig-client: a block-storage host, such '
                                 'as a cinder-volume host (its [DEFAULT] '
                                 'host).')
        action.add_argument('--host', dest='on_host', required=True,
                            help='The host.')
    export.add_argument('--to', required=True, help='The file to write.')
    export.add_argument('--same-generation', action='store_true',
                        help='The key the host has, derived from every '
                             'master key now in use: after "key rotate", '
                             'so that its current file stays good until it '
                             'gets this one.')
    actions.add_parser('list', help='The hosts that hold a key.')

    server = subparsers.add_parser('server', help='Servers.')
    actions = server.add_subparsers(dest='action', required=True)
    reset = actions.add_parser(
        'reset-state', help='Clear a stuck task state (refused while a '
                            'migration holds the server).')
    reset.add_argument('server', help="The server's id.")
    reset.add_argument('--state', default='active',
                       choices=['active', 'stopped', 'error'],
                       help='The vm_state it gets.')

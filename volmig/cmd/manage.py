"""volmig-manage: operator commands.

``db sync|version``; ``volume list`` and ``volume migrate VOLUME --to
POOL [--max-bandwidth-mbps N] [--wait]``, which ask volmig-volume over
RPC.
"""

import sys
import time

from oslo_config import cfg

from volmig import config
from volmig import context as volmig_context
from volmig.conf import CONF
from volmig.db import migration
from volmig.volume import file as file_volumes


def _db_sync() -> None:
    migration.upgrade()
    print('Database is at revision %s' % migration.current_revision())


def _db_version() -> None:
    print(migration.current_revision() or 'empty')


def _volume_list() -> None:
    volumes = file_volumes.FileVolumeAdapter()
    for vol in volumes.list_volumes(volmig_context.get_admin_context()):
        print('%s  %-7s %6d MiB  %-9s %s' % (
            vol['id'], vol['pool'], vol['size_mb'], vol['status'],
            vol.get('migration_status') or ''))


def _volume_migrate() -> int:
    admin = volmig_context.get_admin_context()
    volumes = file_volumes.FileVolumeAdapter()
    command = CONF.category
    vol = volumes.migrate_volume(admin, command.volume, command.to,
                                 command.max_bandwidth_mbps)
    print('volume %s: migrating to %s (migrations %s)'
          % (vol['id'], command.to, ', '.join(vol['migration_ids']) or
             'none: not attached'))
    while command.wait:
        vol = volumes.get_volume(admin, command.volume)
        print('  %s %5.1f%%' % (vol['migration_status'],
                                vol['migration_progress']), flush=True)
        if vol['migration_status'] == 'success':
            print('volume %s is in pool %s' % (vol['id'], vol['pool']))
            break
        if vol['migration_status'] == 'error':
            print('migration failed: %s' % vol['migration_error'])
            return 1
        time.sleep(1)
    return 0


_COMMANDS = {('db', 'sync'): _db_sync, ('db', 'version'): _db_version,
             ('volume', 'list'): _volume_list,
             ('volume', 'migrate'): _volume_migrate}


def _add_parsers(subparsers):
    db = subparsers.add_parser('db', help='Database schema.')
    db.add_argument('action', choices=['sync', 'version'])
    vol = subparsers.add_parser('volume', help='Volumes of volmig-volume.')
    actions = vol.add_subparsers(dest='action', required=True)
    actions.add_parser('list', help='List volumes.')
    migrate = actions.add_parser('migrate',
                                 help='Move a volume to another pool.')
    migrate.add_argument('volume')
    migrate.add_argument('--to', required=True, help='Destination pool.')
    migrate.add_argument('--max-bandwidth-mbps', type=int, default=None,
                         help='Copy bandwidth cap in MiB/s.')
    migrate.add_argument('--wait', action='store_true',
                         help='Show progress until it ends.')


category_opt = cfg.SubCommandOpt('category', title='Commands',
                                 handler=_add_parsers)


def main() -> None:
    CONF.register_cli_opt(category_opt)
    config.parse_args(sys.argv[1:], setup_logging=False)
    sys.exit(_COMMANDS[(CONF.category.name, CONF.category.action)]() or 0)

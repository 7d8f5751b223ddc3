"""volmig-manage: operator commands (``db sync``, ``db version``)."""

import sys

from oslo_config import cfg

from volmig import config
from volmig.conf import CONF
from volmig.db import migration


def _db_sync() -> None:
    migration.upgrade()
    print('Database is at revision %s' % migration.current_revision())


def _db_version() -> None:
    print(migration.current_revision() or 'empty')


_COMMANDS = {'sync': _db_sync, 'version': _db_version}


def _add_parsers(subparsers):
    db = subparsers.add_parser('db', help='Database schema.')
    db.add_argument('action', choices=sorted(_COMMANDS))


category_opt = cfg.SubCommandOpt('category', title='Commands',
                                 handler=_add_parsers)


def main() -> None:
    CONF.register_cli_opt(category_opt)
    config.parse_args(sys.argv[1:], setup_logging=False)
    _COMMANDS[CONF.category.action]()

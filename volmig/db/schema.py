"""Schema upgrades with alembic; ``volmig-manage db sync`` calls this."""

import os

from alembic import command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script

from volmig.db import api as db_api

_SCRIPT_LOCATION = os.path.join(os.path.dirname(__file__), 'alembic')


def _config(connection) -> alembic_config.Config:
    config = alembic_config.Config()
    config.set_main_option('script_location', _SCRIPT_LOCATION)
    config.attributes['connection'] = connection
    return config


def upgrade(revision: str = 'head') -> None:
    with db_api.get_engine().begin() as connection:
        command.upgrade(_config(connection), revision)


def current_revision() -> str | None:
    with db_api.get_engine().connect() as connection:
        context = alembic_migration.MigrationContext.configure(connection)
        return context.get_current_revision()


def head_revision() -> str | None:
    return alembic_script.ScriptDirectory(_SCRIPT_LOCATION).get_current_head()

"""MySQL and MariaDB: the one-active-migration indexes, in a form they
can hold, and the volumes' lock rows.

Neither has partial indexes: revision 0003 made its two indexes plain
unique ones there, so a second migration of an attachment was refused
once the first had ended. Here each becomes a unique index on a stored
generated column that holds the key while the migration is in progress
and NULL after (a unique index admits many NULLs). SQLite and
PostgreSQL keep 0003's partial indexes.

``volume_locks`` holds a row per volume that a start or an attach has
locked (``volmig.db.locks``). On Galera a row lock is only the node's:
writing the row is what makes two nodes' transactions conflict, and
the later one fail at its commit and run again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""

from alembic import op
import sqlalchemy as sa

from volmig.db import models

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'volume_locks',
        sa.Column('volume_id', sa.String(36), primary_key=True),
        sa.Column('taken', sa.BigInteger, nullable=False,
                  server_default='0'),
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime))
    if op.get_bind().dialect.name not in models.MYSQL:
        return
    for index, (column, expression) in models.MYSQL_GUARDS.items():
        op.drop_index(index, 'volume_migrations')
        op.add_column('volume_migrations', sa.Column(
            column, sa.String(36), sa.Computed(expression, persisted=True)))
        op.create_index(index, 'volume_migrations', [column], unique=True)

"""At most one migration in progress per attachment, and per volume.

The conductor checks both too, but several conductors may begin starts
at once; the database settles those races. A migration of a volume with
several attachments (all read-only, or all servers off) may have
siblings, one per attachment; any other migration is ``exclusive``: the
only one of its volume in progress.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

ACTIVE = sa.text("status NOT IN ('cancelled', 'completed', 'error')")


EXCLUSIVE = sa.text("status NOT IN ('cancelled', 'completed', 'error') "
                    "AND exclusive")


def upgrade() -> None:
    op.add_column('volume_migrations',
                  sa.Column('exclusive', sa.Boolean, nullable=False,
                            server_default=sa.true()))
    op.create_index('volume_migrations_one_active_idx', 'volume_migrations',
                    ['src_attachment_id'], unique=True,
                    sqlite_where=ACTIVE, postgresql_where=ACTIVE)
    op.create_index('volume_migrations_one_exclusive_idx',
                    'volume_migrations', ['volume_id'], unique=True,
                    sqlite_where=EXCLUSIVE, postgresql_where=EXCLUSIVE)

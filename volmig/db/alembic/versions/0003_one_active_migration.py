"""At most one migration in progress per source attachment.

The conductor checks it too, but several conductors may begin the same
start at once; the database settles that race.

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


def upgrade() -> None:
    op.create_index('volume_migrations_one_active_idx', 'volume_migrations',
                    ['src_attachment_id'], unique=True,
                    sqlite_where=ACTIVE, postgresql_where=ACTIVE)

"""Who runs a migration's current step (volmig.owners), so that no timer
guesses whether a ``starting`` migration's caller still waits on it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from alembic import op
import sqlalchemy as sa

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('volume_migrations',
                  sa.Column('owner', sa.String(255)))

"""Record the guest I/O pauses of each volume migration.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('volume_migrations', sa.Column('pauses_ms', sa.JSON))

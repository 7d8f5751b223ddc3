"""An operator can disable a service: no new servers go to its host.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('services', sa.Column('disabled', sa.Boolean,
                                        nullable=False,
                                        server_default=sa.false()))
    op.add_column('services', sa.Column('disabled_reason', sa.String(255)))

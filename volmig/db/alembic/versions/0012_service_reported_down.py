"""Whether a service's going down was announced: the conductors' healers
send ``service.down`` and ``service.up`` once each, whichever sees it
first.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('services', sa.Column('reported_down', sa.Boolean,
                                        nullable=False,
                                        server_default=sa.false()))

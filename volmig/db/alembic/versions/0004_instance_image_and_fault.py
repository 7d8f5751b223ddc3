"""Servers record the image they boot and their last fault.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('instances', sa.Column('image_ref', sa.String(64)))
    op.add_column('instances', sa.Column('fault_message', sa.Text))
    op.add_column('instances', sa.Column('fault_at', sa.DateTime))

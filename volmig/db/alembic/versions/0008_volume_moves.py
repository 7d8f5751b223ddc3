"""Cinder's migrations of attached volumes, carried out by volmig.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from alembic import op
import sqlalchemy as sa

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'volume_moves',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('old_volume_id', sa.String(36), nullable=False),
        sa.Column('new_volume_id', sa.String(36), nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('attachments', sa.JSON, nullable=False),
        sa.Column('owner', sa.String(255)),
        sa.Column('copy_host', sa.String(255)),
        sa.Column('checksum', sa.String(64)),
        sa.Column('error', sa.Text),
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
        sa.UniqueConstraint(
            'old_volume_id', 'new_volume_id',
            name='uniq_volume_moves0old_volume_id0new_volume_id'))

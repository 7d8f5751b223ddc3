"""volmig-volume's volumes and attachments move from a JSON file here.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'volumes',
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('name', sa.String(255)),
        sa.Column('size_mb', sa.Integer, nullable=False),
        sa.Column('multiattach', sa.Boolean, nullable=False),
        sa.Column('pool', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(255)),
        sa.Column('path', sa.Text),
        sa.Column('migration_status', sa.String(32)),
        sa.Column('migration_pool', sa.String(255)),
        sa.Column('migration_progress', sa.Float),
        sa.Column('migration_error', sa.Text),
        sa.Column('migration_ids', sa.JSON),
        sa.Column('migration_dst', sa.String(36)),
        sa.Column('migration_source', sa.String(36)),
        sa.Column('migration_src_path', sa.Text),
        sa.Column('migration_copy_seconds', sa.Float),
        sa.Column('migration_checksum', sa.String(64)))
    op.create_index('volumes_pool_idx', 'volumes', ['pool'])
    op.create_table(
        'volume_attachments',
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('volume_id', sa.String(36), sa.ForeignKey('volumes.id'),
                  nullable=False),
        sa.Column('instance_uuid', sa.String(36)),
        sa.Column('attach_mode', sa.String(2), nullable=False),
        sa.Column('attach_status', sa.String(16), nullable=False),
        sa.Column('connector', sa.JSON),
        sa.Column('connection_info', sa.JSON))
    op.create_index('volume_attachments_volume_id_idx', 'volume_attachments',
                    ['volume_id'])

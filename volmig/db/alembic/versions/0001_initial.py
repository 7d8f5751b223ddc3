"""Initial schema: services, instances, block device mappings, migrations.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def _timestamps():
    return [sa.Column('created_at', sa.DateTime),
            sa.Column('updated_at', sa.DateTime)]


def upgrade() -> None:
    op.create_table(
        'services',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('binary', sa.String(64), nullable=False),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('topic', sa.String(64), nullable=False),
        sa.Column('version', sa.String(16), nullable=False),
        sa.Column('capabilities', sa.JSON, nullable=False),
        sa.Column('last_seen_at', sa.DateTime, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('binary', 'host',
                            name='uniq_services0binary0host'))
    op.create_table(
        'instances',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('uuid', sa.String(36), nullable=False, unique=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(255)),
        sa.Column('user_id', sa.String(255)),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('vm_state', sa.String(32), nullable=False),
        sa.Column('power_state', sa.String(32), nullable=False),
        sa.Column('task_state', sa.String(32)),
        sa.Column('deleted_at', sa.DateTime),
        *_timestamps())
    op.create_index('instances_host_idx', 'instances', ['host'])
    op.create_index('instances_project_id_idx', 'instances', ['project_id'])
    op.create_table(
        'block_device_mappings',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('instance_uuid', sa.String(36),
                  sa.ForeignKey('instances.uuid'), nullable=False),
        sa.Column('volume_id', sa.String(36), nullable=False),
        sa.Column('attachment_id', sa.String(36), nullable=False,
                  unique=True),
        sa.Column('attach_mode', sa.String(2), nullable=False),
        sa.Column('device_name', sa.String(64), nullable=False),
        sa.Column('boot_index', sa.Integer),
        sa.Column('source_type', sa.String(16), nullable=False),
        sa.Column('destination_type', sa.String(16), nullable=False),
        sa.Column('connection_info', sa.JSON),
        *_timestamps())
    op.create_index('bdm_instance_uuid_idx', 'block_device_mappings',
                    ['instance_uuid'])
    op.create_index('bdm_volume_id_idx', 'block_device_mappings',
                    ['volume_id'])
    op.create_table(
        'volume_migrations',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('uuid', sa.String(36), nullable=False, unique=True),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('volume_id', sa.String(36), nullable=False),
        sa.Column('src_attachment_id', sa.String(36), nullable=False),
        sa.Column('dst_attachment_id', sa.String(36)),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('mode', sa.String(16), nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('project_id', sa.String(255)),
        sa.Column('bytes_done', sa.BigInteger, nullable=False),
        sa.Column('bytes_total', sa.BigInteger, nullable=False),
        sa.Column('job_started_at', sa.DateTime),
        sa.Column('error_phase', sa.String(32)),
        sa.Column('error_reason', sa.Text),
        sa.Column('recovery_needed', sa.Boolean, nullable=False),
        *_timestamps())
    op.create_index('volume_migrations_src_attachment_idx',
                    'volume_migrations', ['src_attachment_id'])
    op.create_index('volume_migrations_volume_status_idx',
                    'volume_migrations', ['volume_id', 'status'])
    op.create_index('volume_migrations_status_idx', 'volume_migrations',
                    ['status'])

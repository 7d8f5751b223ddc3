"""Concurrency caps and pool drains: the ``queued`` migration status's
reason, the copy queue of volmig-volume's pools, and ``pool_drains``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('volume_migrations',
                  sa.Column('queued_reason', sa.Text))
    for column in ('migration_queued_at', 'migration_copy_started_at',
                   'migration_copy_ended_at'):
        op.add_column('volumes', sa.Column(column, sa.DateTime))
    op.add_column('volumes', sa.Column('migration_max_bandwidth_mbps',
                                       sa.Integer))
    op.create_table(
        'pool_drains',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('pool', sa.String(255), nullable=False),
        sa.Column('target_pool', sa.String(255), nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('max_parallel', sa.Integer, nullable=False),
        sa.Column('max_bandwidth_mbps', sa.Integer),
        sa.Column('volumes', sa.JSON, nullable=False),
        sa.Column('finished_at', sa.DateTime),
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
    )
    op.create_index('pool_drains_pool_idx', 'pool_drains', ['pool'])

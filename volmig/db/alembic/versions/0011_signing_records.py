"""What binds RPC messages to their hosts: the generation of each host's
key, the nonces of the messages taken, and a legacy swap's new volume.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from alembic import op
import sqlalchemy as sa

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'host_keys',
        sa.Column('service', sa.String(64), primary_key=True),
        sa.Column('host', sa.String(255), primary_key=True),
        sa.Column('generation', sa.String(32), nullable=False),
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime))
    op.create_table(
        'rpc_nonces',
        sa.Column('nonce', sa.String(32), primary_key=True),
        sa.Column('expires_at', sa.Float, nullable=False),
        sa.Column('claim', sa.String(32), nullable=False),
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime))
    op.create_index('rpc_nonces_expires_at_idx', 'rpc_nonces', ['expires_at'])
    op.add_column('block_device_mappings',
                  sa.Column('swap_to', sa.JSON))

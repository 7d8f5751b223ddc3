"""The database schema. Alembic migrations under ``alembic/`` create it."""

from oslo_db.sqlalchemy import models
import sqlalchemy as sa
from sqlalchemy import orm


class Base(models.TimestampMixin, models.ModelBase, orm.DeclarativeBase):

    def to_dict(self) -> dict:
        return {column.name: getattr(self, column.name)
                for column in self.__table__.columns}


def table(model: type[Base]) -> sa.Table:
    """``model``'s table: statements on it build no ORM objects, which
    cost more than SQLite's work where the caller wants plain values."""
    return Base.metadata.tables[model.__tablename__]


class Service(Base):
    __tablename__ = 'services'
    __table_args__ = (sa.UniqueConstraint('binary', 'host',
                                          name='uniq_services0binary0host'),)

    id = sa.Column(sa.Integer, primary_key=True)
    binary = sa.Column(sa.String(64), nullable=False)
    host = sa.Column(sa.String(255), nullable=False)
    topic = sa.Column(sa.String(64), nullable=False)
    # The RPC API version the service announces, e.g. "1.1".
    version = sa.Column(sa.String(16), nullable=False)
    capabilities = sa.Column(sa.JSON, nullable=False, default=dict)
    last_seen_at = sa.Column(sa.DateTime, nullable=False)
    # A disabled compute host takes no new servers.
    disabled = sa.Column(sa.Boolean, nullable=False, default=False,
                         server_default=sa.false())
    disabled_reason = sa.Column(sa.String(255))
    # Its going down was announced (service.down); cleared with service.up.
    reported_down = sa.Column(sa.Boolean, nullable=False, default=False,
                              server_default=sa.false())


class Instance(Base):
    __tablename__ = 'instances'
    __table_args__ = (sa.Index('instances_host_idx', 'host'),
                      sa.Index('instances_project_id_idx', 'project_id'))

    id = sa.Column(sa.Integer, primary_key=True)
    uuid = sa.Column(sa.String(36), nullable=False, unique=True)
    name = sa.Column(sa.String(255), nullable=False)
    project_id = sa.Column(sa.String(255))
    user_id = sa.Column(sa.String(255))
    host = sa.Column(sa.String(255), nullable=False)
    vm_state = sa.Column(sa.String(32), nullable=False)
    power_state = sa.Column(sa.String(32), nullable=False)
    task_state = sa.Column(sa.String(32))
    # The image booted by kernel; None for a server booted from a volume.
    image_ref = sa.Column(sa.String(64))
    # The last task that failed, for the server's "fault".
    fault_message = sa.Column(sa.Text)
    fault_at = sa.Column(sa.DateTime)
    deleted_at = sa.Column(sa.DateTime)


class BlockDeviceMapping(Base):
    __tablename__ = 'block_device_mappings'
    __table_args__ = (sa.Index('bdm_instance_uuid_idx', 'instance_uuid'),
                      sa.Index('bdm_volume_id_idx', 'volume_id'))

    id = sa.Column(sa.Integer, primary_key=True)
    instance_uuid = sa.Column(sa.String(36),
                              sa.ForeignKey('instances.uuid'),
                              nullable=False)
    volume_id = sa.Column(sa.String(36), nullable=False)
    attachment_id = sa.Column(sa.String(36), nullable=False, unique=True)
    attach_mode = sa.Column(sa.String(2), nullable=False, default='rw')
    device_name = sa.Column(sa.String(64), nullable=False)
    boot_index = sa.Column(sa.Integer)
    source_type = sa.Column(sa.String(16), nullable=False, default='volume')
    destination_type = sa.Column(sa.String(16), nullable=False,
                                 default='volume')
    connection_info = sa.Column(sa.JSON)
    # A legacy swap under way: the new volume, attachment and connection
    # the conductor made for it, which the agent's report of its end may
    # only name (alembic 0011).
    swap_to = sa.Column(sa.JSON)


_IN_PROGRESS = "status NOT IN ('cancelled', 'completed', 'error')"
ACTIVE = sa.text(_IN_PROGRESS)
EXCLUSIVE = sa.text(_IN_PROGRESS + " AND exclusive")
# SQLAlchemy's names for MySQL's dialect, and MariaDB's.
MYSQL = ('mysql', 'mariadb')
# MySQL and MariaDB have no partial index: there each of the two indexes
# below is a unique index on a stored generated column, the key while
# the migration is in progress and NULL after (alembic 0010). Index:
# (column, the column's expression).
MYSQL_GUARDS = {
    'volume_migrations_one_active_idx': (
        'active_attachment_id',
        'CASE WHEN %s THEN src_attachment_id END' % _IN_PROGRESS),
    'volume_migrations_one_exclusive_idx': (
        'exclusive_volume_id',
        'CASE WHEN %s AND exclusive THEN volume_id END' % _IN_PROGRESS),
}


class VolumeMigration(Base):
    __tablename__ = 'volume_migrations'
    __table_args__ = (
        sa.Index('volume_migrations_src_attachment_idx',
                 'src_attachment_id'),
        sa.Index('volume_migrations_volume_status_idx',
                 'volume_id', 'status'),
        sa.Index('volume_migrations_status_idx', 'status'),
        # One migration in progress per attachment (alembic 0003).
        sa.Index('volume_migrations_one_active_idx', 'src_attachment_id',
                 unique=True, sqlite_where=ACTIVE,
                 postgresql_where=ACTIVE),
        # One exclusive migration in progress per volume (alembic 0003).
        sa.Index('volume_migrations_one_exclusive_idx', 'volume_id',
                 unique=True, sqlite_where=EXCLUSIVE,
                 postgresql_where=EXCLUSIVE),
    )

    id = sa.Column(sa.Integer, primary_key=True)
    uuid = sa.Column(sa.String(36), nullable=False, unique=True)
    instance_uuid = sa.Column(sa.String(36), nullable=False)
    volume_id = sa.Column(sa.String(36), nullable=False)
    src_attachment_id = sa.Column(sa.String(36), nullable=False)
    dst_attachment_id = sa.Column(sa.String(36))
    host = sa.Column(sa.String(255), nullable=False)
    mode = sa.Column(sa.String(16), nullable=False)
    status = sa.Column(sa.String(32), nullable=False)
    project_id = sa.Column(sa.String(255))
    bytes_done = sa.Column(sa.BigInteger, nullable=False, default=0)
    bytes_total = sa.Column(sa.BigInteger, nullable=False, default=0)
    job_started_at = sa.Column(sa.DateTime)
    error_phase = sa.Column(sa.String(32))
    error_reason = sa.Column(sa.Text)
    # True when a failure left the guest off src (on an overlay, or in an
    # unknown state) so an operator must recover it.
    recovery_needed = sa.Column(sa.Boolean, nullable=False, default=False)
    # Guest I/O pauses of the driver's steps, {step: milliseconds}.
    pauses_ms = sa.Column(sa.JSON)
    # False when the volume had several attachments at start (all
    # read-only, or all servers off): its siblings may run beside it.
    exclusive = sa.Column(sa.Boolean, nullable=False, default=True,
                          server_default=sa.true())
    # Which concurrency cap holds a queued migration back (alembic 0007).
    queued_reason = sa.Column(sa.Text)
    # The process that runs the current step (volmig.owners), while it
    # waits on an agent; None when the step is nobody's (alembic 0009).
    owner = sa.Column(sa.String(255))

    def to_dict(self) -> dict:
        return self.public(super().to_dict())

    @staticmethod
    def public(values) -> dict:
        """A row's values (a mapping) as callers see them: the uuid is the
        migration's only public id."""
        values = dict(values)
        values['id'] = values.pop('uuid')
        return values


# volmig-volume's records (and the fake backend's, which has no data).
# Only ``volmig.volume_service.records`` reads or writes them.

class Volume(Base):
    __tablename__ = 'volumes'
    __table_args__ = (sa.Index('volumes_pool_idx', 'pool'),)

    id = sa.Column(sa.String(36), primary_key=True)
    name = sa.Column(sa.String(255))
    size_mb = sa.Column(sa.Integer, nullable=False)
    multiattach = sa.Column(sa.Boolean, nullable=False, default=False)
    pool = sa.Column(sa.String(255), nullable=False)
    project_id = sa.Column(sa.String(255))
    # The raw file; None on the fake backend.
    path = sa.Column(sa.Text)
    # Its move to another pool (volmig.volume_service.pool_moves).
    migration_status = sa.Column(sa.String(32))
    migration_pool = sa.Column(sa.String(255))
    migration_progress = sa.Column(sa.Float)
    migration_error = sa.Column(sa.Text)
    migration_ids = sa.Column(sa.JSON)
    migration_dst = sa.Column(sa.String(36))
    # Set on a dst volume: the volume whose data it receives.
    migration_source = sa.Column(sa.String(36))
    migration_src_path = sa.Column(sa.Text)
    migration_copy_seconds = sa.Column(sa.Float)
    migration_checksum = sa.Column(sa.String(64))
    # Order of the queue of a pool's copy cap, and when the copy ran: the
    # record that the cap held (alembic 0007).
    migration_queued_at = sa.Column(sa.DateTime)
    migration_max_bandwidth_mbps = sa.Column(sa.Integer)
    migration_copy_started_at = sa.Column(sa.DateTime)
    migration_copy_ended_at = sa.Column(sa.DateTime)


class VolumeAttachment(Base):
    __tablename__ = 'volume_attachments'
    __table_args__ = (sa.Index('volume_attachments_volume_id_idx',
                               'volume_id'),)

    id = sa.Column(sa.String(36), primary_key=True)
    volume_id = sa.Column(sa.String(36), sa.ForeignKey('volumes.id'),
                          nullable=False)
    instance_uuid = sa.Column(sa.String(36))
    attach_mode = sa.Column(sa.String(2), nullable=False, default='rw')
    attach_status = sa.Column(sa.String(16), nullable=False)
    connector = sa.Column(sa.JSON)
    connection_info = sa.Column(sa.JSON)


class PoolDrain(Base):
    """An operator's request to move every volume out of a pool."""
    __tablename__ = 'pool_drains'
    __table_args__ = (sa.Index('pool_drains_pool_idx', 'pool'),)

    id = sa.Column(sa.String(36), primary_key=True)
    pool = sa.Column(sa.String(255), nullable=False)
    target_pool = sa.Column(sa.String(255), nullable=False)
    # running, completed or cancelled.
    status = sa.Column(sa.String(16), nullable=False)
    max_parallel = sa.Column(sa.Integer, nullable=False)
    max_bandwidth_mbps = sa.Column(sa.Integer)
    # The plan: [{volume_id, size_mb, action, reason, state}], in order.
    volumes = sa.Column(sa.JSON, nullable=False)
    finished_at = sa.Column(sa.DateTime)


class VolumeMove(Base):
    """Cinder's migration of an attached volume, carried out by volmig
    (``volmig.conductor.cinder_moves``): one per old and new volume, however
    many attachments Cinder asked to swap."""
    __tablename__ = 'volume_moves'
    __table_args__ = (sa.UniqueConstraint(
        'old_volume_id', 'new_volume_id',
        name='uniq_volume_moves0old_volume_id0new_volume_id'),)

    id = sa.Column(sa.String(36), primary_key=True)
    old_volume_id = sa.Column(sa.String(36), nullable=False)
    new_volume_id = sa.Column(sa.String(36), nullable=False)
    # moves.STEPS, then done or failed.
    status = sa.Column(sa.String(16), nullable=False)
    # {src attachment id: {instance_uuid, attach_mode, migration_id,
    #  dst_attachment_id}}, one entry per swap request received.
    attachments = sa.Column(sa.JSON, nullable=False)
    # The conductor running it: a restarted or taken-over conductor
    # resumes it from its status.
    owner = sa.Column(sa.String(255))
    copy_host = sa.Column(sa.String(255))
    checksum = sa.Column(sa.String(64))
    error = sa.Column(sa.Text)


class VolumeLock(Base):
    """A volume's lock row on MySQL and MariaDB (``volmig.db.locks``)."""
    __tablename__ = 'volume_locks'

    volume_id = sa.Column(sa.String(36), primary_key=True)
    # Written by each taker: on Galera, the write is what conflicts.
    taken = sa.Column(sa.BigInteger, nullable=False, server_default='0')


class HostKey(Base):
    """A host's RPC signing key, as exported (``volmig.signing``): the
    generation its key was derived with. No secret is kept here."""
    __tablename__ = 'host_keys'

    service = sa.Column(sa.String(64), primary_key=True)
    host = sa.Column(sa.String(255), primary_key=True)
    generation = sa.Column(sa.String(32), nullable=False)


class RpcNonce(Base):
    """The nonce of a message a server took, until the message is stale
    (``volmig.signing.nonces``)."""
    __tablename__ = 'rpc_nonces'
    __table_args__ = (sa.Index('rpc_nonces_expires_at_idx', 'expires_at'),)

    nonce = sa.Column(sa.String(32), primary_key=True)
    # Seconds since the epoch.
    expires_at = sa.Column(sa.Float, nullable=False)
    # Which insert put it there: a store that tries its insert again after
    # a commit whose answer was lost tells its own row from a replay's.
    claim = sa.Column(sa.String(32), nullable=False)

"""The statements of a volume migration's start.

``begin`` sends at most six statements (a test counts them), in two
transactions: what the start concerns; then, holding the volume's lock
(``volmig.db.locks``, one statement on PostgreSQL), the volume's
migrations in progress, its servers, the server's compare-and-swap and
the record. Each query here is one statement.
"""

import sqlalchemy as sa

from volmig import exception
from volmig import states
from volmig.db import api as db_api
from volmig.db import engine
from volmig.db import instances as instances_db
from volmig.db import models

_MAPPINGS = models.table(models.BlockDeviceMapping)
_INSTANCES = models.table(models.Instance)
_SERVICES = models.table(models.Service)
_MIGRATIONS = models.table(models.VolumeMigration)


def _context_query():
    latest = sa.select(sa.func.max(_MIGRATIONS.c.id)).where(
        _MIGRATIONS.c.src_attachment_id
        == sa.bindparam('attachment_id')).scalar_subquery()
    return sa.select(_MAPPINGS, _INSTANCES, _SERVICES, _MIGRATIONS).join(
        _INSTANCES, sa.and_(_INSTANCES.c.uuid == _MAPPINGS.c.instance_uuid,
                            _INSTANCES.c.deleted_at.is_(None))).outerjoin(
        _SERVICES, sa.and_(_SERVICES.c.binary == sa.bindparam('binary'),
                           _SERVICES.c.host == _INSTANCES.c.host)).outerjoin(
        _MIGRATIONS, _MIGRATIONS.c.id == latest).where(
            _MAPPINGS.c.attachment_id == sa.bindparam('attachment_id'))


def _values(row, table) -> dict:
    """``table``'s columns of a joined row."""
    return {column.name: row[column] for column in table.c}


# Built once: building a statement costs more than sending it to SQLite
# (a start's statements were rebuilt, and their cache keys computed, on
# every call).
_START_CONTEXT = _context_query()
_ATTACHED_SERVERS = sa.select(_INSTANCES).join(
    _MAPPINGS, _MAPPINGS.c.instance_uuid == _INSTANCES.c.uuid).where(
        _MAPPINGS.c.volume_id == sa.bindparam('volume_id'),
        _INSTANCES.c.deleted_at.is_(None)).order_by(_MAPPINGS.c.id)


@engine.retried
def context(ctxt, src_attachment_id: str, compute_binary: str) -> dict:
    """The attachment's mapping, its server, the server's compute service
    and the attachment's latest migration (or None), in one query."""
    with db_api.transaction(ctxt) as session:
        row = session.execute(_START_CONTEXT, {
            'attachment_id': src_attachment_id,
            'binary': compute_binary}).first()
    if row is None:
        raise exception.AttachmentNotFound(attachment_id=src_attachment_id)
    row = row._mapping
    # Outer joins: a missing service or migration reads as NULLs.
    if row[_SERVICES.c.id] is None:
        raise exception.ServiceNotFound(binary=compute_binary,
                                        host=row[_INSTANCES.c.host])
    latest = (None if row[_MIGRATIONS.c.id] is None else
              models.VolumeMigration.public(_values(row, _MIGRATIONS)))
    return {'bdm': _values(row, _MAPPINGS),
            'instance': _values(row, _INSTANCES),
            'service': _values(row, _SERVICES), 'latest': latest}


def attached_servers(ctxt, volume_id: str) -> list[dict]:
    """The servers that the volume is attached to, in one query."""
    with db_api.transaction(ctxt) as session:
        return [dict(row._mapping) for row in session.execute(
            _ATTACHED_SERVERS, {'volume_id': volume_id})]


@engine.retried
def record(ctxt, values: dict) -> dict:
    """Lock the server for the migration and record it, atomically: two
    statements, the server's compare-and-swap and the insert."""
    with db_api.transaction(ctxt):
        instances_db.instance_update(
            ctxt, values['instance_uuid'],
            {'task_state': states.TASK_VOLUME_MIGRATING},
            expected_task_state=None, fetch=False)
        return db_api.migration_create(ctxt, values)

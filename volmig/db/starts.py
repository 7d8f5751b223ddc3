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
from volmig.db import models


def _context_query():
    latest = sa.select(sa.func.max(models.VolumeMigration.id)).where(
        models.VolumeMigration.src_attachment_id
        == sa.bindparam('attachment_id')).scalar_subquery()
    return sa.select(
        models.BlockDeviceMapping, models.Instance, models.Service,
        models.VolumeMigration).join(
            models.Instance, sa.and_(
                models.Instance.uuid
                == models.BlockDeviceMapping.instance_uuid,
                models.Instance.deleted_at.is_(None))).outerjoin(
            models.Service, sa.and_(
                models.Service.binary == sa.bindparam('binary'),
                models.Service.host == models.Instance.host)).outerjoin(
            models.VolumeMigration,
            models.VolumeMigration.id == latest).where(
                models.BlockDeviceMapping.attachment_id
                == sa.bindparam('attachment_id'))


# Built once: building a statement costs more than sending it to SQLite
# (a start's statements were rebuilt, and their cache keys computed, on
# every call).
_START_CONTEXT = _context_query()
_ATTACHED_SERVERS = sa.select(models.Instance).join(
    models.BlockDeviceMapping,
    models.BlockDeviceMapping.instance_uuid == models.Instance.uuid).where(
        models.BlockDeviceMapping.volume_id == sa.bindparam('volume_id'),
        models.Instance.deleted_at.is_(None)).order_by(
            models.BlockDeviceMapping.id)


def context(ctxt, src_attachment_id: str, compute_binary: str) -> dict:
    """The attachment's mapping, its server, the server's compute service
    and the attachment's latest migration (or None), in one query."""
    with db_api.transaction(ctxt) as session:
        row = session.execute(_START_CONTEXT, {
            'attachment_id': src_attachment_id,
            'binary': compute_binary}).first()
        if row is None:
            raise exception.AttachmentNotFound(
                attachment_id=src_attachment_id)
        bdm, instance, service, migration = row
        if service is None:
            raise exception.ServiceNotFound(binary=compute_binary,
                                            host=instance.host)
        return {'bdm': bdm.to_dict(), 'instance': instance.to_dict(),
                'service': service.to_dict(),
                'latest': migration.to_dict() if migration else None}


def attached_servers(ctxt, volume_id: str) -> list[dict]:
    """The servers that the volume is attached to, in one query."""
    with db_api.transaction(ctxt) as session:
        return [instance.to_dict() for instance in session.scalars(
            _ATTACHED_SERVERS, {'volume_id': volume_id})]


def record(ctxt, values: dict) -> dict:
    """Lock the server for the migration and record it, atomically: two
    statements, the server's compare-and-swap and the insert."""
    with db_api.transaction(ctxt):
        db_api.instance_update(ctxt, values['instance_uuid'],
                               {'task_state': states.TASK_VOLUME_MIGRATING},
                               expected_task_state=None, fetch=False)
        return db_api.migration_create(ctxt, values)

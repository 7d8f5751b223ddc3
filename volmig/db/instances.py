"""Data access: servers and their block device mappings, as the conductor
keeps them (volmig-api reads them to check the senders of block-storage
calls)."""

import datetime

from oslo_utils import timeutils
import sqlalchemy as sa

from volmig import exception
from volmig import states
from volmig.db import engine
from volmig.db import models

# Instances.

@engine.retried
def instance_create(ctxt, values: dict) -> dict:
    with engine.transaction(ctxt) as session:
        instance = models.Instance(**values)
        session.add(instance)
        session.flush()
        return instance.to_dict()


_INSTANCES = models.table(models.Instance)
_MAPPINGS = models.table(models.BlockDeviceMapping)
# Reads of every report, on the tables (``volmig.db.api``'s reads say
# why).
_INSTANCE = sa.select(_INSTANCES).where(
    _INSTANCES.c.uuid == sa.bindparam('uuid'),
    _INSTANCES.c.deleted_at.is_(None))
_MAPPING_OF_ATTACHMENT = sa.select(_MAPPINGS).where(
    _MAPPINGS.c.attachment_id == sa.bindparam('attachment_id'))


@engine.retried
def instance_get(ctxt, uuid: str) -> dict:
    with engine.reader(ctxt) as session:
        return dict(engine.row(session, _INSTANCE, {'uuid': uuid},
                               exception.InstanceNotFound,
                               instance_uuid=uuid)._mapping)


@engine.retried
def instance_get_all(ctxt, host: str | None = None,
                     project_id: str | None = None, name: str | None = None,
                     limit: int | None = None, marker=None) -> list[dict]:
    """Servers, oldest first; ``name`` is a part of theirs; a page of
    ``limit`` after the server ``marker``."""
    with engine.reader(ctxt) as session:
        query = sa.select(models.Instance).filter_by(deleted_at=None)
        if host:
            query = query.filter_by(host=host)
        if project_id:
            query = query.filter_by(project_id=project_id)
        if name:
            query = query.where(models.Instance.name.contains(
                name, autoescape=True))
        return engine.dicts(session.scalars(engine.page(
            session, query, models.Instance, limit, marker, 'uuid',
            ['id'])))


@engine.retried
def instance_uuids(ctxt, uuids) -> set[str]:
    """Which of ``uuids`` are servers of volmig's own."""
    with engine.reader(ctxt) as session:
        return set(session.scalars(sa.select(models.Instance.uuid).where(
            models.Instance.uuid.in_(list(uuids)),
            models.Instance.deleted_at.is_(None))))


_ANY = object()


@engine.retried
def instance_update(ctxt, uuid: str, values: dict,
                    expected_task_state=_ANY, fetch: bool = True) -> dict:
    """Update an instance; with expected_task_state, only if it matches.

    The compare-and-swap is one UPDATE, so two requests racing for the
    same instance cannot both win. Without ``fetch`` the instance is not
    read back, and an empty dict is returned.
    """
    with engine.transaction(ctxt) as session:
        stmt = sa.update(_INSTANCES).where(
            _INSTANCES.c.uuid == uuid,
            _INSTANCES.c.deleted_at.is_(None)).values(
                updated_at=timeutils.utcnow(), **values)
        if expected_task_state is not _ANY:
            task_state = _INSTANCES.c.task_state
            stmt = stmt.where(
                task_state.is_(None) if expected_task_state is None
                else task_state == expected_task_state)
        # On the table, not the mapped class: the ORM's bulk update path
        # cost more than the UPDATE itself. The session's objects are
        # expired, so a later read in this transaction loads the row anew.
        if session.execute(stmt).rowcount == 0:
            current = session.execute(_INSTANCE, {'uuid': uuid}).first()
            if current is None:
                raise exception.InstanceNotFound(instance_uuid=uuid)
            raise exception.InstanceInvalidState(
                action='change', instance_uuid=uuid,
                task_state=current.task_state)
        session.expire_all()
        if not fetch:
            return {}
        return dict(session.execute(_INSTANCE, {'uuid': uuid}).one()._mapping)


@engine.retried
def instances_in_task_older_than(ctxt, task_states,
                                 age: datetime.timedelta) -> list[dict]:
    with engine.reader(ctxt) as session:
        cutoff = timeutils.utcnow() - age
        return engine.dicts(session.scalars(sa.select(models.Instance).where(
            models.Instance.deleted_at.is_(None),
            models.Instance.task_state.in_(list(task_states)),
            sa.func.coalesce(models.Instance.updated_at,
                             models.Instance.created_at) < cutoff)))


@engine.retried
def instance_destroy(ctxt, uuid: str) -> None:
    with engine.transaction(ctxt) as session:
        session.execute(sa.delete(models.BlockDeviceMapping).filter_by(
            instance_uuid=uuid))
        session.execute(sa.update(models.Instance).filter_by(
            uuid=uuid).values(deleted_at=timeutils.utcnow(),
                              vm_state=states.VM_DELETED, task_state=None))


# Block device mappings.

@engine.retried
def bdm_create(ctxt, values: dict) -> dict:
    with engine.transaction(ctxt) as session:
        bdm = models.BlockDeviceMapping(**values)
        session.add(bdm)
        session.flush()
        return bdm.to_dict()


@engine.retried
def bdm_get_by_attachment(ctxt, attachment_id: str) -> dict:
    with engine.reader(ctxt) as session:
        return dict(engine.row(
            session, _MAPPING_OF_ATTACHMENT, {'attachment_id': attachment_id},
            exception.AttachmentNotFound,
            attachment_id=attachment_id)._mapping)


@engine.retried
def bdm_get_by_volume(ctxt, instance_uuid: str, volume_id: str) -> dict:
    with engine.reader(ctxt) as session:
        bdm = session.scalars(sa.select(models.BlockDeviceMapping).filter_by(
            instance_uuid=instance_uuid, volume_id=volume_id)).first()
        if bdm is None:
            raise exception.VolumeNotAttached(volume_id=volume_id,
                                              instance_uuid=instance_uuid)
        return bdm.to_dict()


@engine.retried
def bdm_get_all(ctxt, instance_uuid: str | list | None = None,
                volume_id: str | None = None) -> list[dict]:
    """Mappings of a server, or of a list of servers."""
    with engine.reader(ctxt) as session:
        query = sa.select(models.BlockDeviceMapping).order_by(
            models.BlockDeviceMapping.id)
        if isinstance(instance_uuid, list):
            query = query.where(
                models.BlockDeviceMapping.instance_uuid.in_(instance_uuid))
        elif instance_uuid:
            query = query.filter_by(instance_uuid=instance_uuid)
        if volume_id:
            query = query.filter_by(volume_id=volume_id)
        return engine.dicts(session.scalars(query))


@engine.retried
def bdm_update(ctxt, bdm_id: int, values: dict) -> dict:
    return _mapping_update(ctxt, _MAPPINGS.c.id == bdm_id, values,
                           'mapping %s' % bdm_id)


@engine.retried
def bdm_update_by_attachment(ctxt, attachment_id: str, values: dict) -> dict:
    """The mapping of ``attachment_id``, updated: what a switch to dst
    writes, in one statement."""
    return _mapping_update(ctxt, _MAPPINGS.c.attachment_id == attachment_id,
                           values, attachment_id)


def _mapping_update(ctxt, where, values: dict, missing: str) -> dict:
    """One UPDATE on the table, and the row it wrote, returned by the
    statement where the database can (PostgreSQL, SQLite). MySQL cannot:
    there the row is read, locked, first, as the ORM read it, since the
    update may change what found it (a switch's attachment id). The ORM
    cost a mapped object, and the read, for one change."""
    values = dict(values, updated_at=timeutils.utcnow())
    with engine.transaction(ctxt) as session:
        if session.get_bind().dialect.update_returning:
            row = session.execute(sa.update(_MAPPINGS).where(where).values(
                **values).returning(*_MAPPINGS.c)).first()
            written = None if row is None else dict(row._mapping)
        else:
            row = session.execute(sa.select(_MAPPINGS).where(
                where).with_for_update()).first()
            written = None if row is None else dict(row._mapping, **values)
            if row is not None:
                session.execute(sa.update(_MAPPINGS).where(
                    _MAPPINGS.c.id == row.id).values(**values))
        # Objects this session loaded before are stale now.
        session.expire_all()
        if written is None:
            raise exception.AttachmentNotFound(attachment_id=missing)
        return written


@engine.retried
def bdm_destroy(ctxt, bdm_id: int) -> None:
    with engine.transaction(ctxt) as session:
        session.execute(sa.delete(models.BlockDeviceMapping).filter_by(
            id=bdm_id))

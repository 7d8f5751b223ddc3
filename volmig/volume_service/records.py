"""Volume and attachment records in the database, Cinder-shaped.

volmig-volume keeps its volumes here, and so does the fake backend,
which has no data: what differs is the connection info a host gets for
an attachment. Status changes are compare-and-swap, as the conductor's
are, so two requests never both win a race for one volume.
"""

import typing

from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from volmig import exception
from volmig import states
from volmig.db import api as db_api
from volmig.db import models

_HIDDEN = ('created_at', 'updated_at')




def _volume(session, volume_id: str):
    volume = session.get(models.Volume, volume_id)
    if volume is None:
        raise exception.VolumeNotFound(volume_id=volume_id)
    return volume


# An attach under way: the move would not find the guest to start.
ATTACHING = (states.ATTACH_RESERVED, states.ATTACH_ATTACHING)


def _lock(session, volume_id: str):
    """The volume's record, held until the transaction ends.

    An attach and a move's start each take it first, so one runs after the
    other: on PostgreSQL the write locks the row, on SQLite the database.
    """
    if not session.execute(sa.update(models.Volume).where(
            models.Volume.id == volume_id).values(
                updated_at=models.Volume.updated_at)).rowcount:
        raise exception.VolumeNotFound(volume_id=volume_id)
    return _volume(session, volume_id)


def _attachment(session, attachment_id: str):
    attachment = session.get(models.VolumeAttachment, attachment_id)
    if attachment is None:
        raise exception.AttachmentNotFound(attachment_id=attachment_id)
    return attachment


def _plain(row) -> dict:
    """A record's values without its bookkeeping: of a mapped object, or
    of a row read from the table."""
    values = (row.to_dict() if isinstance(row, models.Base)
              else dict(row._mapping))
    for key in _HIDDEN:
        values.pop(key)
    return values


# Built once, on the tables (models.table): every start reads the
# volume and its attachments, every complete an attachment and two
# volumes' sizes.
_VOLUME_TABLE = models.table(models.Volume)
_ATTACHMENT_TABLE = models.table(models.VolumeAttachment)
_VOLUME = sa.select(_VOLUME_TABLE).where(
    _VOLUME_TABLE.c.id == sa.bindparam('volume_id'))
_ATTACHMENT = sa.select(_ATTACHMENT_TABLE).where(
    _ATTACHMENT_TABLE.c.id == sa.bindparam('attachment_id'))
_SIZE = sa.select(_VOLUME_TABLE.c.size_mb).where(
    _VOLUME_TABLE.c.id == sa.bindparam('volume_id'))
_ATTACHMENTS = sa.select(_ATTACHMENT_TABLE).where(
    _ATTACHMENT_TABLE.c.volume_id == sa.bindparam('volume_id')).order_by(
        _ATTACHMENT_TABLE.c.created_at, _ATTACHMENT_TABLE.c.id)


# What an attach's update reads: the attachment and its volume.
_ATTACHMENT_AND_VOLUME = sa.select(_ATTACHMENT_TABLE, _VOLUME_TABLE).join(
    _VOLUME_TABLE, _VOLUME_TABLE.c.id == _ATTACHMENT_TABLE.c.volume_id
).where(_ATTACHMENT_TABLE.c.id == sa.bindparam('attachment_id'))


def _columns(row, table) -> dict:
    """``table``'s values in a joined row, without bookkeeping."""
    return {column.name: row._mapping[column] for column in table.c
            if column.name not in _HIDDEN}


def _attachment_update(attachment_id: str, values: dict):
    """One UPDATE on the table: through a mapped object, the ORM read
    the attachment first, a statement of its own."""
    return sa.update(_ATTACHMENT_TABLE).where(
        _ATTACHMENT_TABLE.c.id == attachment_id).values(
            updated_at=timeutils.utcnow(), **values)


def _found(session, statement, volume_id: str):
    """``statement``'s row of the volume; VolumeNotFound if it has none."""
    return db_api.row(session, statement, {'volume_id': volume_id},
                      exception.VolumeNotFound, volume_id=volume_id)


def _attachments_of(session, volume_id: str) -> list[dict]:
    return [_plain(row) for row in session.execute(
        _ATTACHMENTS, {'volume_id': volume_id})]


def _present(session, volume, attachments=None) -> dict:
    values = _plain(volume)
    if attachments is None:
        attachments = _attachments_of(session, values['id'])
    statuses = {a['attach_status'] for a in attachments}
    if states.ATTACH_ATTACHED in statuses:
        status = 'in-use'
    elif states.ATTACH_ATTACHING in statuses:
        status = 'attaching'
    elif statuses:
        status = 'reserved'
    else:
        status = 'available'
    values['migration_ids'] = values['migration_ids'] or []
    return dict(values, status=status, attachments=attachments)


class VolumeRecords:

    def connection_info(self, volume: dict, attachment: dict) -> dict:
        """What a host needs to open the volume."""
        return {'driver_volume_type': 'fake',
                'data': {'volume_id': volume['id'],
                         'access_mode': attachment['attach_mode']}}

    @db_api.retried
    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None, **extra):
        with db_api.own_transaction() as session:
            volume = models.Volume(
                id=uuidutils.generate_uuid(), name=name, size_mb=size_mb,
                multiattach=bool(multiattach), pool=pool or 'fake',
                project_id=getattr(ctxt, 'project_id', None), **extra)
            session.add(volume)
            session.flush()
            return _present(session, volume)

    @db_api.retried
    def update_volume(self, volume_id: str, expected_status=(),
                      no_attach_under_way=False, **values) -> dict:
        """Update a volume; with ``expected_status`` (a tuple of migration
        statuses, None for none), only from one of them; with
        ``no_attach_under_way`` (a move's start), only if no attach of it
        is under way, else Conflict."""
        with db_api.own_transaction() as session:
            if no_attach_under_way:
                _lock(session, volume_id)
                for attachment in _attachments_of(session, volume_id):
                    if attachment['attach_status'] in ATTACHING:
                        raise exception.Conflict(
                            reason='volume %s is being attached to server '
                            '%s (attachment %s is %s): move it once that '
                            'attach has ended' % (
                                volume_id, attachment['instance_uuid'],
                                attachment['id'],
                                attachment['attach_status']))
            stmt = sa.update(models.Volume).where(
                models.Volume.id == volume_id).values(
                    updated_at=timeutils.utcnow(), **values)
            if expected_status:
                column: typing.Any = models.Volume.migration_status
                allowed = column.in_(
                    [s for s in expected_status if s is not None])
                if None in expected_status:
                    allowed = sa.or_(allowed, column.is_(None))
                stmt = stmt.where(allowed)
            if session.execute(stmt).rowcount == 0:
                current = _volume(session, volume_id)
                raise exception.VolumeStatusChanged(
                    volume_id=volume_id, status=current.migration_status)
            return _present(session, _volume(session, volume_id))

    @db_api.retried
    def get_volume(self, ctxt, volume_id):
        with db_api.own_transaction() as session:
            return _present(session, _found(session, _VOLUME, volume_id))

    @db_api.retried
    def volume_size_mb(self, ctxt, volume_id):
        """One statement, where the volume with its attachments is two."""
        with db_api.own_transaction() as session:
            return _found(session, _SIZE, volume_id).size_mb

    @db_api.retried
    def list_volumes(self, ctxt, limit=None, marker=None):
        """Oldest first: every volume for an admin, a project's for its
        members; a page of ``limit`` after the volume ``marker``."""
        with db_api.own_transaction() as session:
            query = sa.select(models.Volume)
            if not ctxt.sees_every_project:
                query = query.filter_by(project_id=ctxt.project_id)
            return [_present(session, volume) for volume in session.scalars(
                db_api.page(session, query, models.Volume, limit, marker,
                            'id', ['created_at', 'id']))]

    @db_api.retried
    def volumes_by_id(self, volume_ids) -> dict[str, dict]:
        """Those of ``volume_ids`` that exist, in two queries."""
        ids = list(volume_ids)
        with db_api.own_transaction() as session:
            attachments: dict[str, list] = {}
            for row in session.scalars(
                    sa.select(models.VolumeAttachment).where(
                        models.VolumeAttachment.volume_id.in_(ids)).order_by(
                            models.VolumeAttachment.created_at,
                            models.VolumeAttachment.id)):
                attachments.setdefault(row.volume_id, []).append(_plain(row))
            return {volume.id: _present(session, volume,
                                        attachments.get(volume.id, []))
                    for volume in session.scalars(sa.select(
                        models.Volume).where(models.Volume.id.in_(ids)))}

    @db_api.retried
    def delete_volume(self, ctxt, volume_id):
        with db_api.own_transaction() as session:
            volume = _volume(session, volume_id)
            if _attachments_of(session, volume_id):
                raise exception.Conflict(
                    reason='volume %s is attached' % volume_id)
            gone = _plain(volume)
            session.delete(volume)
            return gone

    @db_api.retried
    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        with db_api.own_transaction() as session:
            volume = _lock(session, volume_id)
            if volume.migration_status in states.POOL_MOVE_COPYING:
                raise exception.Conflict(
                    reason='volume %s is moving to pool %s: attach it once '
                    'the move has ended' % (volume_id,
                                            volume.migration_pool))
            if not volume.multiattach:
                # Decided here, under the volume's lock, as Cinder's
                # reservation is: two attaches that each checked before
                # either recorded cannot both win. The same server may
                # hold a second attachment (a migration's, a swap's).
                other = session.scalars(sa.select(
                    models.VolumeAttachment.instance_uuid).where(
                        models.VolumeAttachment.volume_id == volume_id,
                        models.VolumeAttachment.instance_uuid
                        != instance_uuid).limit(1)).first()
                if other is not None:
                    raise exception.MultiattachNotSupported(
                        volume_id=volume_id, instance_uuid=other)
            attachment = models.VolumeAttachment(
                id=uuidutils.generate_uuid(), volume_id=volume_id,
                instance_uuid=instance_uuid, attach_mode=mode,
                attach_status=states.ATTACH_RESERVED)
            session.add(attachment)
            session.flush()
            return _plain(attachment)

    @db_api.retried
    def attachment_get(self, ctxt, attachment_id):
        with db_api.own_transaction() as session:
            return _plain(db_api.row(
                session, _ATTACHMENT, {'attachment_id': attachment_id},
                exception.AttachmentNotFound, attachment_id=attachment_id))

    @db_api.retried
    def attachment_update(self, ctxt, attachment_id, connector):
        """Two statements: the attachment with its volume, and the
        update."""
        with db_api.own_transaction() as session:
            row = db_api.row(session, _ATTACHMENT_AND_VOLUME,
                             {'attachment_id': attachment_id},
                             exception.AttachmentNotFound,
                             attachment_id=attachment_id)
            values = {'connector': connector,
                      'attach_status': states.ATTACH_ATTACHING}
            attachment = dict(_columns(row, _ATTACHMENT_TABLE), **values)
            values['connection_info'] = attachment['connection_info'] = (
                self.connection_info(_columns(row, _VOLUME_TABLE),
                                     attachment))
            session.execute(_attachment_update(attachment_id, values))
            return attachment

    @db_api.retried
    def attachment_complete(self, ctxt, attachment_id):
        with db_api.own_transaction() as session:
            if not session.execute(_attachment_update(
                    attachment_id,
                    {'attach_status': states.ATTACH_ATTACHED})).rowcount:
                raise exception.AttachmentNotFound(
                    attachment_id=attachment_id)

    @db_api.retried
    def attachment_delete(self, ctxt, attachment_id):
        with db_api.own_transaction() as session:
            session.delete(_attachment(session, attachment_id))

    # What volmig-volume's migrations record.

    @db_api.retried
    def add_migration_id(self, volume_id: str, migration_id: str) -> dict:
        with db_api.own_transaction() as session:
            volume = _volume(session, volume_id)
            volume.migration_ids = list(volume.migration_ids or []) + [
                migration_id]
            session.flush()
            return _present(session, volume)

    @db_api.retried
    def adopt(self, volume_id: str, dst_id: str, src_attachment_ids,
              status: str) -> None:
        """dst's data and attachments become the volume's, in one
        transaction; dst's record goes, src's attachments go."""
        with db_api.own_transaction() as session:
            volume = _volume(session, volume_id)
            target = _volume(session, dst_id)
            volume.migration_src_path = volume.path
            volume.path, volume.pool = target.path, target.pool
            volume.migration_status = status
            volume.migration_progress = 100.0
            volume.migration_dst = None
            session.execute(sa.delete(models.VolumeAttachment).where(
                models.VolumeAttachment.id.in_(list(src_attachment_ids))))
            session.execute(sa.update(models.VolumeAttachment).where(
                models.VolumeAttachment.volume_id == dst_id).values(
                    volume_id=volume_id))
            session.delete(target)

    @db_api.retried
    def purge(self, volume_id: str) -> None:
        """Forget a volume and its attachments (an abandoned dst)."""
        with db_api.own_transaction() as session:
            session.execute(sa.delete(models.VolumeAttachment).filter_by(
                volume_id=volume_id))
            session.execute(sa.delete(models.Volume).filter_by(
                id=volume_id))

    @db_api.retried
    def restore(self, volumes, attachments) -> None:
        """Insert saved records; those already here are left as they are,
        so an import interrupted after its commit can run again."""
        columns = {model: {c.name for c in model.__table__.columns}
                   for model in (models.Volume, models.VolumeAttachment)}
        with db_api.own_transaction() as session:
            for model, saved in ((models.Volume, volumes),
                                 (models.VolumeAttachment, attachments)):
                for record in saved:
                    if session.get(model, record['id']) is None:
                        session.add(model(**{
                            key: value for key, value in record.items()
                            if key in columns[model]}))
                session.flush()

    @db_api.retried
    def with_migration_under_way(self, statuses) -> list[dict]:
        """Volumes whose migration is in ``statuses``, or whose src file
        is still to be deleted."""
        with db_api.own_transaction() as session:
            return [_present(session, volume) for volume in session.scalars(
                sa.select(models.Volume).where(sa.or_(
                    models.Volume.migration_status.in_(list(statuses)),
                    models.Volume.migration_src_path.is_not(None))))]

    @db_api.retried
    def kept_dst(self, status: str) -> list[dict]:
        """Volumes whose migration ended in ``status`` with dst kept."""
        with db_api.own_transaction() as session:
            return [_present(session, volume) for volume in session.scalars(
                sa.select(models.Volume).where(
                    models.Volume.migration_status == status,
                    models.Volume.migration_dst.is_not(None)))]

    @db_api.retried
    def queued_migrations(self, status: str) -> list[dict]:
        """Volumes whose migration waits in ``status``, oldest first."""
        with db_api.own_transaction() as session:
            return [_present(session, volume) for volume in session.scalars(
                sa.select(models.Volume).filter_by(
                    migration_status=status).order_by(
                        models.Volume.migration_queued_at,
                        models.Volume.id))]

"""Records of Cinder's migrations that volmig carries out.

Only ``volmig.conductor.cinder_moves`` reads or writes them (table
``volume_moves``, its name from before the module's). Every status change
is a compare-and-swap, so two conductors never both run one step.
"""

from oslo_db import exception as db_exc
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from volmig import exception
from volmig import states
from volmig.db import api as db_api
from volmig.db import engine
from volmig.db import models


def _transaction(ctxt):
    return db_api.transaction(ctxt)


@engine.retried
def add_request(ctxt, old_volume_id: str, new_volume_id: str,
                src_attachment_id: str, entry: dict,
                status: str) -> dict:
    """Record one swap request; the move is made by the first."""
    for _ in range(2):
        try:
            with _transaction(ctxt) as session:
                move = session.scalars(sa.select(models.VolumeMove).filter_by(
                    old_volume_id=old_volume_id,
                    new_volume_id=new_volume_id).with_for_update()).first()
                if move is None:
                    move = models.VolumeMove(
                        id=uuidutils.generate_uuid(),
                        old_volume_id=old_volume_id,
                        new_volume_id=new_volume_id, status=status,
                        attachments={})
                    session.add(move)
                move.attachments = dict(move.attachments,
                                        **{src_attachment_id: entry})
                session.flush()
                return move.to_dict()
        except db_exc.DBDuplicateEntry:
            # Another conductor made it meanwhile: add to theirs.
            continue
    raise exception.Conflict(reason='volume move %s -> %s keeps changing'
                             % (old_volume_id, new_volume_id))


@engine.retried
def get(ctxt, move_id: str) -> dict:
    with _transaction(ctxt) as session:
        move = session.get(models.VolumeMove, move_id)
        if move is None:
            raise exception.NotFound('Volume move %s could not be found.'
                                     % move_id)
        return move.to_dict()


@engine.retried
def get_all(ctxt, statuses) -> list[dict]:
    with _transaction(ctxt) as session:
        return [move.to_dict() for move in session.scalars(
            sa.select(models.VolumeMove).where(
                models.VolumeMove.status.in_(statuses)))]


@engine.retried
def update(ctxt, move_id: str, expected_status: str, **values) -> dict:
    """Change a move only from ``expected_status``; returns it.

    The one gate of a move's status: the state machine must allow the
    change, and it is a compare-and-swap.
    """
    if 'status' in values:
        states.check_move_transition(move_id, expected_status,
                                     values['status'])
    with _transaction(ctxt) as session:
        changed = session.execute(
            sa.update(models.VolumeMove).where(
                models.VolumeMove.id == move_id,
                models.VolumeMove.status == expected_status).values(
                    updated_at=timeutils.utcnow(), **values)).rowcount
        move = session.get(models.VolumeMove, move_id)
        if not changed:
            raise exception.VolumeStatusChanged(
                volume_id=move.old_volume_id if move else move_id,
                status=move.status if move else None)
        return move.to_dict()

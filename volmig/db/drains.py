"""A pool's drains, as volmig-volume records them
(``volmig.volume_service.drain``): each drain's plan, status and pace.
"""

from oslo_utils import timeutils
import sqlalchemy as sa

from volmig import exception
from volmig.db import api as db_api
from volmig.db import models


@db_api.retried
def create(**values) -> dict:
    with db_api.own_transaction() as session:
        drain = models.PoolDrain(**values)
        session.add(drain)
        session.flush()
        return drain.to_dict()


@db_api.retried
def latest(pool: str) -> dict | None:
    with db_api.own_transaction() as session:
        drain = session.scalars(sa.select(models.PoolDrain).filter_by(
            pool=pool).order_by(models.PoolDrain.created_at.desc(),
                                models.PoolDrain.id).limit(1)).first()
        return drain.to_dict() if drain else None


@db_api.retried
def get_all(pool: str, limit: int | None = None,
            marker: str | None = None) -> list[dict]:
    """The pool's drains, newest first; a page after ``marker``."""
    with db_api.own_transaction() as session:
        return [drain.to_dict() for drain in session.scalars(
            db_api.page(session, sa.select(models.PoolDrain).filter_by(
                pool=pool), models.PoolDrain, limit, marker, 'id',
                ['created_at', 'id'], sort_dir='desc'))]


@db_api.retried
def running() -> list[dict]:
    with db_api.own_transaction() as session:
        return [drain.to_dict() for drain in session.scalars(
            sa.select(models.PoolDrain).filter_by(
                status='running').order_by(models.PoolDrain.created_at))]


@db_api.retried
def update(drain_id: str, expected_status: str, **values) -> dict:
    """Update a drain, only while it is in ``expected_status``."""
    with db_api.own_transaction() as session:
        stmt = sa.update(models.PoolDrain).where(
            models.PoolDrain.id == drain_id,
            models.PoolDrain.status == expected_status).values(
                updated_at=timeutils.utcnow(), **values)
        if session.execute(stmt).rowcount == 0:
            drain = session.get(models.PoolDrain, drain_id)
            raise exception.NoDrainRunning(
                pool=drain.pool if drain else drain_id)
        return session.get(models.PoolDrain, drain_id).to_dict()

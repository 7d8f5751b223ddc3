"""The services' records: each service's heartbeat, its RPC version and
whether it takes new work. Only the conductor calls this."""

import datetime

from oslo_utils import timeutils
import sqlalchemy as sa

from volmig import exception
from volmig.db import engine
from volmig.db import models


@engine.retried
def update(ctxt, binary: str, host: str, topic: str, version: str,
           capabilities: dict) -> None:
    """Create or refresh a service record; this is the heartbeat.

    One UPDATE a beat, and an INSERT only at a host's first: a cell's
    thousand agents beat tens of times a second, and a read of the row
    first, then an ORM flush, cost the conductor four times the CPU.
    """
    values = {'topic': topic, 'version': version,
              'capabilities': capabilities,
              'last_seen_at': timeutils.utcnow()}
    with engine.transaction(ctxt) as session:
        # MySQL counts the rows matched, not those changed: SQLAlchemy
        # connects with FOUND_ROWS.
        if not session.execute(
                sa.update(models.Service).where(
                    models.Service.binary == binary,
                    models.Service.host == host).values(**values)
                .execution_options(synchronize_session=False)).rowcount:
            session.add(models.Service(binary=binary, host=host, **values))


@engine.retried
def mark_reported(ctxt, service_id: int, down: bool,
                  seen_since: datetime.datetime) -> bool:
    """Record that the service's going ``down`` (or back up) is announced;
    whether this call did, the service still being so. A compare-and-swap:
    of several conductors, one announces it."""
    seen = models.Service.__table__.c.last_seen_at
    still = seen < seen_since if down else seen >= seen_since
    with engine.transaction(ctxt) as session:
        return bool(session.execute(
            sa.update(models.Service).where(
                models.Service.id == service_id,
                models.Service.reported_down == (not down), still).values(
                    reported_down=down)
            .execution_options(synchronize_session=False)).rowcount)


@engine.retried
def get_all(ctxt, binary: str | None = None, host: str | None = None,
            limit: int | None = None, marker: int | None = None) -> list[dict]:
    """Services by host; a page of ``limit`` after the service whose id
    is ``marker``."""
    with engine.reader(ctxt) as session:
        query = sa.select(models.Service)
        if binary:
            query = query.filter_by(binary=binary)
        if host:
            query = query.filter_by(host=host)
        return [service.to_dict() for service in session.scalars(
            engine.page(session, query, models.Service, limit, marker, 'id',
                        ['host', 'id']))]


def _service(session, binary: str, host: str):
    service = session.scalars(sa.select(models.Service).filter_by(
        binary=binary, host=host)).first()
    if service is None:
        raise exception.ServiceNotFound(binary=binary, host=host)
    return service


_SERVICES = models.table(models.Service)
# Read with every complete (the host's connector), on the table: an ORM
# object cost as much again as the query.
_SERVICE = sa.select(_SERVICES).where(
    _SERVICES.c.binary == sa.bindparam('binary'),
    _SERVICES.c.host == sa.bindparam('host'))


@engine.retried
def get(ctxt, binary: str, host: str) -> dict:
    with engine.reader(ctxt) as session:
        return dict(engine.row(session, _SERVICE,
                               {'binary': binary, 'host': host},
                               exception.ServiceNotFound, binary=binary,
                               host=host)._mapping)


@engine.retried
def set_disabled(ctxt, binary: str, host: str, disabled: bool,
                 reason: str | None) -> dict:
    with engine.transaction(ctxt) as session:
        service = _service(session, binary, host)
        service.disabled = disabled
        service.disabled_reason = reason if disabled else None
        session.flush()
        return service.to_dict()


@engine.retried
def delete(ctxt, binary: str, host: str) -> None:
    with engine.transaction(ctxt) as session:
        session.delete(_service(session, binary, host))


@engine.retried
def least_loaded(ctxt, binary: str,
                 seen_since: datetime.datetime) -> dict | None:
    """The enabled service of ``binary`` seen since ``seen_since`` whose
    host runs the fewest servers, by host name on a tie; None if there is
    none. One query: a cell of 1,000 hosts and 2,000 servers read every
    record of both for each server placed, and building them stalled."""
    load = (sa.select(models.Instance.host,
                      sa.func.count().label('servers'))
            .filter_by(deleted_at=None).group_by(models.Instance.host)
            .subquery())
    query = (sa.select(models.Service)
             .outerjoin(load, load.c.host == models.Service.host)
             .filter(models.Service.binary == binary,
                     models.Service.disabled.is_(False),
                     models.Service.last_seen_at >= sa.literal(seen_since))
             .order_by(sa.func.coalesce(load.c.servers, 0),
                       models.Service.host)
             .limit(1))
    with engine.reader(ctxt) as session:
        service = session.scalars(query).first()
        return service.to_dict() if service is not None else None

"""How volmig reaches its database: one transaction factory, and what
runs a transaction again when the database gives it up for a conflict.
"""

import functools
import time

from oslo_db import api as oslo_db_api
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import utils as db_utils
from oslo_service import backend
import sqlalchemy as sa

from volmig import exception
from volmig import metrics
from volmig.db import models
from volmig.db import sqlite

_CONTEXT = enginefacade.transaction_context()


def configure(connection: str) -> None:
    """Point the data layer at a database; used by services and tests."""
    global _CONTEXT
    _CONTEXT = enginefacade.transaction_context()
    url = sa.engine.make_url(connection)
    if url.get_backend_name() in models.MYSQL and 'charset' not in url.query:
        # oslo.db asks MySQL for utf8, its three-byte form, unless the
        # URL names one: a server's name of four-byte characters failed.
        connection = url.update_query_dict({'charset': 'utf8mb4'}) \
            .render_as_string(hide_password=False)
    # oslo.db yields the processor as each connection goes back to its
    # pool so that green threads take turns; native threads are
    # preempted, and there the yield hands the interpreter lock away in
    # the middle of a request.
    green = backend.get_backend_type() == backend.BackendType.EVENTLET
    _CONTEXT.configure(connection=connection, sqlite_fk=True,
                       thread_checkin=green)
    _CONTEXT.append_on_engine_create(sqlite.pool_connections)
    _CONTEXT.append_on_engine_create(sqlite.serialize_transactions)
    _CONTEXT.append_on_engine_create(metrics.count_statements)
    _CONTEXT.append_on_engine_create(connect_patiently)


# HAProxy sends a new connection to a database node that died until its
# checks mark it down (1.5 s measured), and a Galera node holds commits
# until the others evict the dead one (evs.suspect_timeout).
PATIENCE = 10


def connect_patiently(engine) -> None:
    """A connection that cannot be made is tried again for ``PATIENCE``
    seconds before the error goes to the transaction that wanted it:
    a transaction begun as a database node dies waits for another node
    rather than fail. oslo.db checks each pooled connection as it is
    taken (a dead one is replaced by a new one, made here)."""
    if engine.dialect.name == 'sqlite':
        return

    @sa.event.listens_for(engine, 'do_connect')
    def _connect(dialect, record, cargs, cparams):
        deadline = time.monotonic() + PATIENCE
        delay = 0.05
        while True:
            try:
                return dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1)


def transaction(ctxt):
    """One transaction around several calls of the data layer."""
    return _CONTEXT.writer.using(ctxt)


def reader(ctxt):
    return _CONTEXT.reader.using(ctxt)


class _Scope:
    """A transaction of its own, outside any caller's."""


def own_transaction():
    """A transaction of its own, whatever the caller's context: for records
    a call keeps alone (volmig-volume's, hosts' keys, drains)."""
    return transaction(_Scope())


def own_reader():
    """A read of its own, as ``own_transaction``."""
    return reader(_Scope())


def page(session, query, model, limit: int | None, marker, key: str,
         sort_keys: list[str], sort_dir: str = 'asc'):
    """``query``'s items after the one whose ``key`` is ``marker``, at
    most ``limit`` of them, in ``sort_keys`` order (unique as a whole;
    ``sort_dir`` 'desc' for the newest first): oslo.db's keyset pages,
    as Nova's lists are cut."""
    if limit is None and marker is None:
        # The whole list in order, on the table's columns: oslo.db's
        # pages order by the model's attributes, which makes a statement
        # on the table the ORM's to compile.
        order = sa.desc if sort_dir == 'desc' else sa.asc
        return query.order_by(*(order(model.__table__.c[key])
                                 for key in sort_keys))
    after = None
    if marker is not None:
        after = session.scalars(sa.select(model).filter_by(
            **{key: marker})).first()
        if after is None:
            raise exception.MarkerNotFound(marker=marker)
    return db_utils.paginate_query(query, model, limit, sort_keys,
                                   marker=after, sort_dir=sort_dir)


def get_engine():
    return _CONTEXT.writer.get_engine()


# A conflict is settled within a few of the other transaction's commits
# (about 7 tries at most in 200 hot-row writes from two Galera nodes). A
# lost connection is a database node gone: HAProxy sends the next one to
# another node within about 2 s; the tries span about 8 s.
_RETRY = dict(max_retries=20, retry_interval=0.01, inc_retry_interval=True,
              max_retry_interval=0.5, retry_on_deadlock=True,
              retry_on_disconnect=True)
_AGAIN = oslo_db_api.wrap_db_retry(**_RETRY)
_AGAIN_MOVED = oslo_db_api.wrap_db_retry(
    exception_checker=lambda error: isinstance(
        error, exception.MigrationStatusMoved), **_RETRY)


def _in_transaction(args) -> bool:
    for arg in args:
        scopes = getattr(arg, '_enginefacade_context', None)
        if scopes is not None:
            return getattr(scopes, 'current', None) is not None
    return False


def retried(function):
    """``function`` run again, whole, when the database gives its
    transaction up for a conflict with another's (``DBDeadlock``): an
    InnoDB deadlock, or a Galera node's write that another node's
    commit certified first; or when its connection is lost
    (``DBConnectionError``). Nothing of a transaction given up was
    written, so what ``function`` read is read again. A connection lost
    during the commit may have written it: each status write is a
    compare-and-swap that takes the status it would write as done.

    Only a transaction of its own runs again: called inside another
    (its context's), the conflict goes on out to the one that opened it.
    """
    return _own(function, _AGAIN(function))


def rereads(function):
    """As ``retried``, and also when a status write of ``function``
    finds that the status it read has moved (``MigrationStatusMoved``):
    the same report delivered twice at once (an agent asked again while
    its first message waited on a restarted conductor), both read one
    status and the first wrote. Run again, it reads the status as it is
    now, and decides on that: a repeat is a no-op, not a conflict.

    Only for a function that reads each status it replaces: one that
    names a fixed one would find it moved at every try.
    """
    return _own(function, _AGAIN_MOVED(function))


def _own(function, again):
    @functools.wraps(function)
    def call(*args, **kwargs):
        if _in_transaction(args):
            return function(*args, **kwargs)
        return again(*args, **kwargs)
    return call


def row(session, statement, params: dict, missing, **reason):
    """``statement``'s first row, read on the table; raises
    ``missing(**reason)`` when there is none."""
    found = session.execute(statement, params).first()
    if found is None:
        raise missing(**reason)
    return found


def dicts(rows) -> list[dict]:
    """Each row of a query, as the dict every caller gets."""
    return [row.to_dict() for row in rows]

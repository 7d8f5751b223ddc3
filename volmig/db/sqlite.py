"""How volmig's engine uses a SQLite file: the embedded default's database.

Each function is called with a new engine; on other databases it does
nothing.
"""

import sqlalchemy as sa
from sqlalchemy import pool


def pool_connections(engine) -> None:
    """Keep a SQLite file's connections open between transactions.

    oslo.db opens a SQLite file anew for each transaction (a NullPool)
    and each time runs the pragmas below: more than half of a start's
    database time. A pool of reused connections, as every other database
    gets, takes that off each transaction. The pool keeps oslo.db's events;
    beyond the connections it keeps, it opens more as before rather than
    make a thread wait (SQLite queues the writers on its own lock).
    """
    if (engine.dialect.name != 'sqlite'
            or not isinstance(engine.pool, pool.NullPool)):
        return
    # Built as Pool.recreate() builds a pool's successor: the same
    # creator, dialect and listeners (SQLAlchemy has no public setter).
    engine.pool = pool.QueuePool(
        engine.pool._creator, pool_size=5, max_overflow=-1,
        dialect=engine.pool._dialect, _dispatch=engine.pool.dispatch)


def serialize_transactions(engine) -> None:
    """On SQLite, make every transaction take the write lock as it begins.

    Several threads of the embedded default share one SQLite file. A
    transaction that reads and then writes cannot upgrade its lock while
    another holds one, and SQLite fails it at once ("database is locked")
    instead of waiting. Taking the lock up front makes them queue.
    """
    if engine.dialect.name != 'sqlite':
        return

    @sa.event.listens_for(engine, 'connect')
    def _connect(dbapi_connection, record):
        dbapi_connection.execute('PRAGMA busy_timeout = 60000')
        # One fsync of the log per commit instead of several of the file.
        dbapi_connection.execute('PRAGMA journal_mode = WAL')

    # oslo.db has pysqlite leave transactions to SQLAlchemy and emits a
    # plain BEGIN itself; make that BEGIN take the write lock.
    @sa.event.listens_for(engine, 'before_cursor_execute', retval=True)
    def _begin_immediate(connection, cursor, statement, parameters, context,
                         executemany):
        if statement == 'BEGIN':
            statement = 'BEGIN IMMEDIATE'
        return statement, parameters

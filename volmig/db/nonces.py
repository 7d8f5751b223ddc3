"""The nonces of the messages this topic's servers took
(``volmig.signing.nonces``), in the database they share.

Each message costs one INSERT, committed by itself, on a connection of
this store's own: the primary key refuses a nonce already there,
whichever process put it there. The connection is the driver's own,
held open and in autocommit: through the session machinery a
transaction that begins, inserts and commits costs about four times the
CPU (measured here: 120 against 480 us on PostgreSQL), SQLAlchemy's
events would make a SQLite connection begin a transaction it never
ends, and psycopg2 sends its BEGIN and the COMMIT as round trips of
their own, three for one row. A message is not worth waiting for the
disk (``_UNFLUSHED``): a nonce lost to a crash of the database server
reopens only the few seconds before it.
"""

import secrets
import threading
import time

from oslo_log import log as logging

from volmig.db import engine

LOG = logging.getLogger(__name__)

# Seconds between sweeps of the nonces of stale messages.
PURGE_INTERVAL = 60.0
# Tries of a statement, on a new connection after each failure: about
# 0.6 s in all, well within a caller's timeout.
ATTEMPTS = 5
# Each statement in its driver's own form: SQLite's marks (qmark), or
# psycopg2's and PyMySQL's.
_STATEMENTS = {
    True: {'insert': 'INSERT INTO rpc_nonces (nonce, expires_at, claim) '
                     'VALUES (?, ?, ?)',
           'claim': 'SELECT claim FROM rpc_nonces WHERE nonce = ?',
           'purge': 'DELETE FROM rpc_nonces WHERE expires_at < ?'},
    False: {'insert': 'INSERT INTO rpc_nonces (nonce, expires_at, claim) '
                      'VALUES (%s, %s, %s)',
            'claim': 'SELECT claim FROM rpc_nonces WHERE nonce = %s',
            'purge': 'DELETE FROM rpc_nonces WHERE expires_at < %s'}}


# A nonce's commit need not wait for the disk: on PostgreSQL none of this
# connection's, and on a SQLite file in WAL mode (``db.sqlite``) only the
# log's checkpoints. MySQL's flush is the server's setting alone.
_UNFLUSHED = {'postgresql': 'SET synchronous_commit TO OFF',
              'sqlite': 'PRAGMA synchronous = NORMAL'}


class DatabaseNonces:

    not_before = 0.0

    def __init__(self):
        self._lock = threading.Lock()
        self._connection = None
        self._purged = time.time()
        dialect = engine.get_engine().dialect
        self._dbapi = dialect.loaded_dbapi
        self._statements = _STATEMENTS[dialect.paramstyle == 'qmark']
        self._dialect = dialect.name

    def _connect(self):
        database = engine.get_engine()
        connection = database.raw_connection()
        # Never given back to the pool, where it would serve the session
        # machinery's transactions in autocommit: invalidated instead.
        database.dialect.set_isolation_level(connection.dbapi_connection,
                                             'AUTOCOMMIT')
        if self._dialect in _UNFLUSHED:
            connection.cursor().execute(_UNFLUSHED[self._dialect])
        return connection

    def _execute(self, statement: str, parameters: tuple) -> tuple | None:
        """Committed on the held connection; on a new one, a few times, if
        it was lost (a database node gone, or restarted) or given up (a
        Galera node's conflict: the purge's DELETE and other nodes'
        inserts conflicted twice running while a node was killed under a
        migration, and its message failed). Returns the first row the
        statement read."""
        for attempt in range(1, ATTEMPTS + 1):
            if attempt > 1:
                time.sleep(0.01 * 2 ** attempt)
            if self._connection is None:
                self._connection = self._connect()
            try:
                cursor = self._connection.cursor()
                cursor.execute(self._statements[statement], parameters)
                return cursor.fetchone() if cursor.description else None
            except self._dbapi.IntegrityError:
                raise  # the nonce taken, on a connection that works
            except self._dbapi.Error:
                connection, self._connection = self._connection, None
                try:
                    connection.invalidate()
                except self._dbapi.Error:
                    pass
                if attempt == ATTEMPTS:
                    raise
        return None

    def remember(self, nonce: str, until: float) -> bool:
        claim = secrets.token_hex(16)
        with self._lock:
            now = time.time()
            if now - self._purged > PURGE_INTERVAL:
                self._purged = now
                try:
                    self._execute('purge', (now,))
                except self._dbapi.Error as exc:
                    # Housekeeping: the next sweep deletes what this one
                    # left; the message is not refused for it.
                    LOG.warning('RPC nonces not purged: %s', exc)
            try:
                self._execute('insert', (nonce, until, claim))
            except self._dbapi.IntegrityError:
                # Taken before: by another message, or by this insert, whose
                # commit went through though its answer was lost (a Galera
                # node killed under it) and which was then tried again.
                row = self._execute('claim', (nonce,))
                return row is not None and row[0] == claim
        return True

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.invalidate()
                self._connection = None

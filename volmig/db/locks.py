"""A volume's lock in the database: what settles a start against an
attach, whichever conductors run them.

A start reads the volume's mappings, decides and records its migration
in one transaction that holds the volume's lock. An attach records its
mapping first, then checks for migrations in a transaction that holds
the same lock. Whichever takes the lock second sees what the first
committed: the start sees the new mapping, or the attach sees the
migration and gives way. Neither can miss the other.

On PostgreSQL the lock is a transaction-level advisory lock on a key
made from the volume's id, released by the commit. On MySQL and
MariaDB it is the volume's row in ``volume_locks``, written: InnoDB
holds the row's lock to the commit, and on Galera, where locks are each
node's own, the write makes two nodes' transactions conflict, so the
later commit fails and its transaction runs again from the start
(``volmig.db.engine.retried``), to see what the first committed. On
SQLite every transaction takes the database's write lock as it begins
(``volmig.db.sqlite``), which serializes these transactions already.
"""

import hashlib

import sqlalchemy as sa

from volmig import states
from volmig.db import api as db_api
from volmig.db import engine
from volmig.db import instances as instances_db
from volmig.db import models

_ADVISORY_LOCK = sa.text('SELECT pg_advisory_xact_lock(:key)')
_ROW_LOCK = sa.text(
    'INSERT INTO volume_locks (volume_id, taken) VALUES (:volume_id, 1) '
    'ON DUPLICATE KEY UPDATE taken = taken + 1')


def _key(volume_id: str) -> int:
    # Advisory locks take a signed 64-bit key. Two volumes whose keys
    # collide only wait on each other.
    digest = hashlib.blake2b(volume_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, 'big', signed=True)


def lock_volume(session, volume_id: str) -> None:
    """Hold ``volume_id``'s lock until ``session``'s transaction ends."""
    dialect = session.get_bind().dialect.name
    if dialect == 'postgresql':
        session.execute(_ADVISORY_LOCK, {'key': _key(volume_id)})
    elif dialect in models.MYSQL:
        session.execute(_ROW_LOCK, {'volume_id': volume_id})


@engine.retried
def attach_check(ctxt, volume_id: str) -> dict:
    """What an attach checks once it has recorded its mapping, read under
    the volume's lock: ``{'migrations'}`` in progress and the volume's
    ``{'mappings'}``."""
    with db_api.transaction(ctxt) as session:
        lock_volume(session, volume_id)
        return {'migrations': db_api.migration_get_all(
                    ctxt, status=states.IN_PROGRESS, volume_id=volume_id),
                'mappings': instances_db.bdm_get_all(ctxt,
                                                     volume_id=volume_id)}

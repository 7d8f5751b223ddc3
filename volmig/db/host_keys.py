"""Which hosts hold an RPC signing key, and of which generation.

``volmig-manage key export`` records a host here as it writes the host's
key, ``key revoke`` forgets it; every controller reads the record
(``volmig.signing.registry``). A key is derived from the master key, the
host's kind, its name and its generation, so a name exported again gets a
new key and the old one is refused at once. Nothing here is secret.
"""

import secrets

import sqlalchemy as sa

from volmig import exception
from volmig.db import engine
from volmig.db import models


@engine.retried
def register(service: str, host: str, keep: bool = False) -> str:
    """A new generation for (service, host), replacing any other; with
    ``keep``, the one it has (a key exported again after the master key
    was rotated), or a new one if it has none."""
    with engine.own_transaction() as session:
        record = session.get(models.HostKey, (service, host))
        if record is None:
            record = models.HostKey(service=service, host=host)
            session.add(record)
        elif keep:
            return record.generation
        record.generation = secrets.token_hex(16)
        session.flush()
        return record.generation


@engine.retried
def revoke(service: str, host: str) -> None:
    with engine.own_transaction() as session:
        if not session.execute(sa.delete(models.HostKey).where(
                models.HostKey.service == service,
                models.HostKey.host == host)).rowcount:
            raise exception.NotFound('No key of %s on %s is registered.'
                                     % (service, host))


_ALL = sa.select(models.table(models.HostKey).c.service,
                 models.table(models.HostKey).c.host,
                 models.table(models.HostKey).c.generation)


@engine.retried
def load() -> dict:
    """``{(service, host): generation}`` of every host that holds a key."""
    with engine.own_reader() as session:
        return {(service, host): generation
                for service, host, generation in session.execute(_ALL)}


@engine.retried
def get_all() -> list[dict]:
    with engine.own_reader() as session:
        return [record.to_dict() for record in session.scalars(
            sa.select(models.HostKey).order_by(models.HostKey.service,
                                               models.HostKey.host))]

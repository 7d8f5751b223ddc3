"""Service records: liveness from heartbeats, and what operators change.

A disabled compute host takes no new servers; its running servers and
their migrations carry on. A record is deleted only once its service is
down for good and, for a compute host, has no servers left.
"""

import datetime

from oslo_utils import timeutils

from volmig import exception
from volmig import owners
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conf import CONF
from volmig.db import instances as instances_db
from volmig.db import services as service_db


def up_since() -> datetime.datetime:
    """A service seen since this is up."""
    return timeutils.utcnow() - datetime.timedelta(
        seconds=CONF.service_down_time)


def service_is_up(service: dict) -> bool:
    return service['last_seen_at'] >= up_since()


def in_flight(ctxt, migration: dict) -> bool:
    """A start whose owner still waits on its agent: the start is the
    owner's to record, and no one else reconciles it."""
    return (migration['status'] == states.STARTING
            and owner_alive(ctxt, migration['owner']))


def owner_alive(ctxt, owner: str | None) -> bool:
    """Whether the process that ``owner`` names still runs: its service
    is up and reports the same generation (volmig.owners)."""
    if not owner:
        return False
    binary, host, generation = owners.parse(owner)
    try:
        service = service_db.get(ctxt, binary, host)
    except exception.ServiceNotFound:
        return False
    return (service_is_up(service) and
            service['capabilities'].get(owners.CAPABILITY) == generation)


def get_all(ctxt, binary: str | None = None, **page) -> list[dict]:
    """``page``: ``host``, ``limit``, ``marker`` (``service_db.get_all``)."""
    return [dict(service, is_up=service_is_up(service))
            for service in service_db.get_all(ctxt, binary, **page)]


def set_disabled(ctxt, binary: str, host: str, disabled: bool,
                 reason: str | None = None) -> dict:
    service = service_db.set_disabled(ctxt, binary, host, disabled, reason)
    return dict(service, is_up=service_is_up(service))


def delete(ctxt, binary: str, host: str) -> None:
    service = service_db.get(ctxt, binary, host)
    if service_is_up(service):
        raise exception.ServiceIsUp(binary=binary, host=host)
    if binary == compute_rpcapi.BINARY:
        servers = instances_db.instance_get_all(ctxt, host=host)
        if servers:
            raise exception.ServiceInUse(binary=binary, host=host,
                                         count=len(servers))
    service_db.delete(ctxt, binary, host)


def connector(ctxt, host: str, attach_mode: str) -> dict:
    """What block storage is told of the host a volume is connected to.

    The agent announces its os-brick connector (address, initiators) in
    its service record; an agent older than that is known by name only,
    which is all volmig-volume needs.
    """
    try:
        announced = service_db.get(ctxt, compute_rpcapi.BINARY,
                                   host)['capabilities'].get('connector')
    except exception.ServiceNotFound:
        announced = None
    return dict(announced or {}, host=host, mode=attach_mode)

"""Signed RPC: every message and every reply bound to the host that
sent it.

Who holds which key (``keys``):

- the master key: volmig-api, volmig-conductor and volmig-manage, the
  controllers. They could derive every other key from it, so to the bus
  they are one sender, ``controller``;
- each host, whatever its kind (a compute host, a volmig-volume node, a
  block-storage client such as a cinder-volume host): a key of its own,
  derived from the master key for its kind, its name and a generation
  that the controllers record in the database when they export it
  (``volmig-manage key export``). A key exported again for the same name
  is a new one, and ``volmig-manage key revoke`` ends a host's at once,
  without a new master key.

A message between a controller and a host is sealed with that host's key,
whichever way it goes, and so is its reply; between controllers, with the
controllers' own. A message from a controller to the volmig-volume topic,
which any volume node may take, carries one seal per node. So a host can
check what the controllers send it, and can sign as nobody but itself.

Every seal's nonce is remembered where every server that could take the
message again looks: the database for the services that have one, a
journal on the host's disk for the compute agent (``nonces``).

RabbitMQ's validated ``user_id`` property is not used: oslo.messaging sets
no message properties and hands none to the server. A host's RabbitMQ user
(``tools/rabbitmq-setup.sh``) reads its own queues and replies only.
"""

import collections
import typing

from oslo_log import log as logging

from volmig import exception
from volmig import metrics

LOG = logging.getLogger(__name__)

CONTROLLER = 'controller'
COMPUTE = 'volmig-compute'
VOLUME = 'volmig-volume'
CLIENT = 'volmig-client'
# The kinds of host a key may be exported for.
HOSTS = (COMPUTE, VOLUME, CLIENT)
# Where a request's seal travels: a key of the serialized request context.
SIGNATURE = 'volmig_signature'
# Where a sealed reply travels: the one key of the result.
REPLY = 'volmig_reply'
CREDENTIAL = 'volmig-key'
DEFAULT_KEY_FILE = '/etc/volmig/key.json'

Sender = collections.namedtuple('Sender', 'service host')


class Unsigned(Sender):
    signs: typing.Callable[[str, str], bool]
    """The sender of a message that the operator lets in unsigned while a
    rolling upgrade runs (``[signing] allow_unsigned``): nobody knows who
    it is. It speaks for a host that holds no key yet, never for one that
    signs (``signs(service, host)``: whether a host of that kind does)."""

    def __new__(cls, signs: typing.Callable[[str, str], bool]):
        unsigned = super().__new__(cls, 'unsigned', '')
        unsigned.signs = signs
        return unsigned


_logged: set = set()
_LOGGED_MOST = 4096


def refuse(method, claim: Sender | None, kind: str, reason: str,
           error=exception.MessageRefused) -> typing.NoReturn:
    """Raises ``error`` (``MessageRefused``): logged once per sender and
    ``kind`` (unsigned, malformed, stale, forged, unknown-key,
    unknown-host, revoked, replayed, method, host, reply), counted every
    time."""
    who = '%s on %s' % claim if claim else 'an unknown sender'
    metrics.RPC_REFUSED.labels(sender=claim.service if claim else 'unknown',
                               reason=kind).inc()
    # A forger names any sender it likes: the set stays bounded.
    if (claim, kind) not in _logged and len(_logged) < _LOGGED_MOST:
        _logged.add((claim, kind))
        LOG.warning('Refused RPC %(method)s from %(who)s: %(reason)s '
                    '(logged once per sender and reason)',
                    {'method': method, 'who': who, 'reason': reason})
    raise error(method=method, sender=who, reason=reason)


def speaks_for(ctxt, host: str | None, service: str = COMPUTE) -> bool:
    """Whether ``ctxt``'s sender may report on the records of ``host`` (a
    ``service`` host): a controller, a call made in this process (no
    sender), and a host about itself; an unsigned message about a host
    that does not sign yet."""
    sender = getattr(ctxt, 'sender', None)
    if sender is None or sender.service == CONTROLLER:
        return True
    if not host:
        return False
    if isinstance(sender, Unsigned):
        return service in HOSTS and not sender.signs(service, host)
    return (sender.service, sender.host) == (service, host)


def check_host(ctxt, host: str | None, method: str,
               service: str = COMPUTE) -> None:
    if not speaks_for(ctxt, host, service):
        refuse(method, getattr(ctxt, 'sender', None), 'host',
               'a host reports on its own records only')

"""Seals: what binds a message, and its reply, to both of its ends.

A request's seal is an HMAC over the method, its arguments, the request
context's fields, the topic and server it was sent to, a timestamp and a
nonce, with the secret of its host end (``keys``). A call asks for a
sealed reply: the server answers with its result, or its failure, sealed
with the same secret and bound to the request's nonce, so that only the
server called can answer it.
"""

import collections
import hashlib
import hmac
import json
import math
import re
import time
import typing
import uuid

from oslo_serialization import jsonutils

from volmig import exception
from volmig import signing
from volmig.signing import keys as keys_mod

VERSION = 2
# The topics whose servers are hosts, each holding a key of its own (their
# literal names: the RPC API modules import this one).
COMPUTE_TOPIC = 'volmig-compute'
HOST_TOPICS = {COMPUTE_TOPIC: signing.COMPUTE,
               'volmig-volume': signing.VOLUME}
_NONCE = re.compile(r'^[0-9a-f]{32}$')

# What a caller keeps of its request to check the reply: the host end of
# the request (``host`` None: any volmig-volume node), and its nonce.
Sent = collections.namedtuple('Sent', 'topic server service host nonce')


def _canonical(value) -> bytes:
    """The bytes both ends agree on: JSON, keys sorted. What the sender
    seals is what the receiver rebuilds from the wire (tuples are lists,
    keys strings); a value of another type (the serializer made the rest
    primitive already) goes through oslo's own conversion first, as the
    driver's does."""
    try:
        return json.dumps(value, sort_keys=True,
                          separators=(',', ':')).encode()
    except TypeError:
        plain = json.loads(jsonutils.dumps(value))
        return json.dumps(plain, sort_keys=True,
                          separators=(',', ':')).encode()


def _mac(secret: bytes, parts: list) -> str:
    return hmac.new(secret, _canonical([VERSION] + parts),
                    hashlib.sha256).hexdigest()


def _request_parts(seal: dict, topic: str, ctxt: dict,
                   message: dict) -> list:
    """The seal (with the server it was sent to), the topic, the message
    and the context's signed fields (the transport adds its own,
    ``client_timeout``, on the way)."""
    return ['request', seal['key'], seal['service'], seal['host'],
            seal['gen'], seal['ts'], seal['nonce'], topic, seal['server'],
            seal['reply'], seal['fields'],
            [ctxt.get(field) for field in seal['fields']],
            message.get('method'), message.get('namespace'),
            message.get('version'), message.get('args', {})]


def host_end(claim: signing.Sender, topic: str,
             server) -> tuple[str, str | None]:
    """Whose key seals a message from ``claim`` to (topic, server): the
    host at its other end, ``(CONTROLLER, '')`` between controllers, and
    host None for any volmig-volume node (its topic has no server)."""
    if claim.service != signing.CONTROLLER:
        return claim.service, claim.host
    service = HOST_TOPICS.get(topic)
    if service is None:
        return signing.CONTROLLER, ''
    return service, server or None


def sign(keyring: keys_mod.Keyring, topic: str, server, ctxt: dict,
         message: dict, reply: bool = False) -> tuple[dict, Sent]:
    """``ctxt`` with the seal of the message to (topic, server), and what
    the caller needs to check its reply (``reply``: a call's)."""
    claim = keyring.identity
    key = keyring.signing_key()
    service, host = host_end(claim, topic, server)
    seal = {'v': VERSION, 'key': key.id, 'service': claim.service,
            'host': claim.host,
            'gen': (keyring.holder.generation if keyring.holder else None),
            'ts': time.time(), 'nonce': uuid.uuid4().hex, 'server': server,
            'reply': reply,
            'fields': sorted(field for field in ctxt
                             if field != signing.SIGNATURE)}
    parts = _request_parts(seal, topic, ctxt, message)
    if host is None:
        # Any volume node may take it: a seal for each, none for another.
        seal['macs'] = {node: _mac(secret, parts)
                        for node in keyring.hosts(service)
                        if (secret := keyring.secret(key, service, node))}
        if not seal['macs']:
            raise exception.HostHoldsNoKey(
                reason='no %s node holds a key: export one ("volmig-manage '
                       'key export --service %s --host HOST")'
                       % (service, service))
    else:
        secret = keyring.secret(key, service, host)
        if secret is None:
            raise exception.HostHoldsNoKey(
                reason='%s on "%s" holds no key: a message to it cannot be '
                       'sealed ("volmig-manage key export --service %s '
                       '--host %s")' % (service, host, service, host))
        seal['mac'] = _mac(secret, parts)
    sealed = dict(ctxt, **{signing.SIGNATURE: seal})
    return sealed, Sent(topic, server, service, host, seal['nonce'])


class Received:
    """A message whose seal was checked: its sender, and how to seal the
    reply the sender asked for (``reply``: None for a cast, and for an
    unsigned message)."""

    def __init__(self, sender: signing.Sender, reply=None):
        self.sender = sender
        self.reply = reply


def _reply_parts(key_id: int, replier: signing.Sender, nonce: str,
                 topic: str, body: dict) -> list:
    return ['reply', key_id, replier.service, replier.host, nonce, topic,
            body]


def seal_reply(secret: bytes, key_id: int, replier: signing.Sender,
               nonce: str, topic: str, body: dict) -> dict:
    """A reply, ``{'result': ...}`` or ``{'failure': ...}``, sealed."""
    seal = {'key': key_id, 'service': replier.service,
            'host': replier.host}
    seal['mac'] = _mac(secret, _reply_parts(key_id, replier, nonce, topic,
                                            body))
    return {signing.REPLY: {'body': body, 'seal': seal}}


def is_sealed(reply) -> bool:
    return isinstance(reply, dict) and signing.REPLY in reply


def refuse_reply(sent: Sent, method: str, said: str) -> typing.NoReturn:
    """Raises ``ReplyRefused`` for an unsealed failure: what it says is
    shown, and taken as no answer."""
    signing.refuse(method, signing.Sender(sent.service, sent.host or ''),
                   'reply', 'the reply is not sealed by the server called '
                   '(it said: %s)' % said, error=exception.ReplyRefused)


def open_reply(keyring: keys_mod.Keyring, sent: Sent, method: str,
               reply) -> dict:
    """The body of a reply to the request ``sent``, if the server called
    sealed it; raises ``ReplyRefused`` otherwise."""
    def refused(reason: str, claim=None):
        signing.refuse(method, claim, 'reply', reason,
                       error=exception.ReplyRefused)

    try:
        envelope = reply[signing.REPLY]
        body, seal = envelope['body'], envelope['seal']
        replier = signing.Sender(str(seal['service']), str(seal['host']))
        key = keyring.key(int(seal['key']))
        mac = str(seal['mac'])
    except (TypeError, KeyError, ValueError):
        refused('the reply is not sealed')
    if sent.service == signing.CONTROLLER or keyring.holder is not None:
        # A controller's answer: to a controller, or to this host.
        wanted = replier.service == signing.CONTROLLER
        service, host = sent.service, sent.host
    else:
        service, host = sent.service, sent.host or replier.host
        wanted = (replier.service, replier.host) == (service, host)
    secret = keyring.secret(key, service, host) if key and wanted else None
    expected = key and secret and _mac(secret, _reply_parts(
        key.id, replier, sent.nonce, sent.topic, body))
    if not expected or not hmac.compare_digest(mac, expected):
        refused('the reply is not sealed by the server called', replier)
    return body


class Checker:
    """Checks each message a server takes: its seal, its sender and its
    freshness; remembers its nonce in ``nonces`` (``volmig.signing.
    nonces``)."""

    def __init__(self, keyring: keys_mod.Keyring, topic: str, server: str,
                 conf, nonces):
        self._keyring = keyring
        self._topic = topic
        self._server = server
        self._conf = conf
        self.nonces = nonces

    def check(self, ctxt: dict, message: dict) -> Received:
        """The sender the seal proves; raises ``MessageRefused``."""
        seal = ctxt.get(signing.SIGNATURE)
        method = message.get('method')
        if not isinstance(seal, dict):
            if self._conf.signing.allow_unsigned:
                return Received(signing.Unsigned(self._keyring.signs))
            signing.refuse(method, None, 'unsigned', 'unsigned')
        try:
            claim = signing.Sender(str(seal['service']), str(seal['host']))
            if seal['v'] != VERSION:
                raise ValueError(seal['v'])
            key_id, sent, nonce = (int(seal['key']), float(seal['ts']),
                                   str(seal['nonce']))
            fields = [str(field) for field in seal['fields']]
            server, wants_reply = seal['server'], bool(seal['reply'])
            if not math.isfinite(sent) or not _NONCE.match(nonce):
                raise ValueError(nonce)
            service, host = host_end(claim, self._topic, server)
            # A seal for this node among the volume nodes', or the one.
            mac = str(seal['macs'][self._server] if host is None
                      else seal['mac'])
        except (KeyError, TypeError, ValueError):
            signing.refuse(method, None, 'malformed', 'malformed signature')
        if abs(time.time() - sent) > self._conf.signing.max_age:
            signing.refuse(method, claim, 'stale', 'stale: sent %.0f s ago'
                           % (time.time() - sent))
        key = self._keyring.key(key_id)
        if key is None:
            signing.refuse(method, claim, 'unknown-key',
                           'unknown key %d' % key_id)
        host = self._server if host is None else host
        if claim.service != signing.CONTROLLER:
            self._check_generation(method, claim, seal.get('gen'))
        # Sent to this server, or to any of the topic's.
        secret = (self._keyring.secret(key, service, host)
                  if server in (None, self._server) else None)
        if secret is None or not hmac.compare_digest(
                mac, _mac(secret, _request_parts(seal, self._topic, ctxt,
                                                 message))):
            signing.refuse(method, claim, 'forged',
                           'forged: the signature does not match')
        if sent < self.nonces.not_before or not self.nonces.remember(
                nonce, sent + self._conf.signing.max_age + 1):
            signing.refuse(method, claim, 'replayed', 'replayed')
        # Only what the sender signed goes on to the method.
        for field in set(ctxt) - set(fields) - {signing.SIGNATURE}:
            del ctxt[field]
        reply = None
        if wants_reply:
            # This server as the message's other end: the host it was
            # sent to (a host's own key, or a controller's process that
            # serves a host itself), or the controllers.
            replier = (signing.Sender(service, host)
                       if claim.service == signing.CONTROLLER
                       and service != signing.CONTROLLER
                       else self._keyring.identity)

            def reply(body: dict) -> dict:
                return seal_reply(secret, key.id, replier, nonce,
                                  self._topic, body)
        return Received(claim, reply)

    def _check_generation(self, method, claim: signing.Sender,
                          generation) -> None:
        """A host's key is the one its controllers know now."""
        known = self._keyring.generation(claim.service, claim.host)
        if known is None:
            signing.refuse(method, claim, 'unknown-host',
                           'no key of this host is known (never exported, '
                           'or revoked)')
        if generation != known:
            signing.refuse(method, claim, 'revoked',
                           'its key was exported again or revoked')

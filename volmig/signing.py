"""Signed RPC: every message bound to the service that sent it.

Who holds which key:

- the master key: volmig-api, volmig-conductor and volmig-manage, the
  controllers. They could derive every other key from it, so to the bus
  they are one sender, ``controller``;
- a compute host: the key derived for ("volmig-compute", its host);
- volmig-volume: the key derived for ("volmig-volume", ""), one for every
  volmig-volume, as they serve one topic with no server;
- a block-storage client (Cinder): the key for ("volmig-client", its
  host).

A message is signed with the key of its end that is not a controller: a
host signs with its own key, and a controller signs what it sends to a
compute host with that host's key, to volmig-volume with volmig-volume's,
and to another controller with the controllers' own. So a host can check
what the controllers send it, and can sign as nobody but itself.

RabbitMQ's validated ``user_id`` property is not used: oslo.messaging
sets no message properties and hands none to the server, and a RabbitMQ
user is per kind of service, not per host.
"""

import base64
import collections
import hashlib
import hmac
import json
import os
import threading
import time
import typing
import uuid

from oslo_log import log as logging
from oslo_serialization import jsonutils

from volmig import atomic_file
from volmig import exception
from volmig import metrics

LOG = logging.getLogger(__name__)

CONTROLLER = 'controller'
COMPUTE = 'volmig-compute'
VOLUME = 'volmig-volume'
CLIENT = 'volmig-client'
# The services a key may be derived for ("volmig-manage key export").
HOSTS = (COMPUTE, VOLUME, CLIENT)
# The topics whose servers hold a key of their own (their literal names:
# the RPC API modules import this one).
_KEYED_TOPICS = {'volmig-compute': COMPUTE, 'volmig-volume': VOLUME}
# Where the signature travels: a key of the serialized request context.
SIGNATURE = 'volmig_signature'
VERSION = 1
CREDENTIAL = 'volmig-key'
DEFAULT_KEY_FILE = '/etc/volmig/key.json'
KEY_BYTES = 32
# How often a key file is looked at for a change, in seconds.
_RELOAD_CHECK = 1.0

Sender = collections.namedtuple('Sender', 'service host')
Key = collections.namedtuple('Key', 'id secret signs_from expires')


def derive(master: bytes, service: str, host: str) -> bytes:
    label = ('volmig-rpc\0%s\0%s' % (service, host)).encode()
    return hmac.new(master, label, hashlib.sha256).digest()


def key_file(conf) -> str:
    """The configured key file, else systemd's credential, else the
    default path."""
    if conf.signing.key_file:
        return conf.signing.key_file
    credentials = os.environ.get('CREDENTIALS_DIRECTORY')
    if credentials and os.path.exists(os.path.join(credentials,
                                                   CREDENTIAL)):
        return os.path.join(credentials, CREDENTIAL)
    return DEFAULT_KEY_FILE


def _keys(values: list) -> list[Key]:
    return sorted((Key(int(key['id']), base64.b64decode(key['secret']),
                       float(key['signs_from']), key.get('expires'))
                   for key in values), key=lambda key: key.id)


def read(path: str) -> tuple[Sender | None, list[Key]]:
    """A key file's holder (None: the master) and keys."""
    try:
        with open(path) as stream:
            values = json.load(stream)
        holder = values.get('holder')
        return (Sender(holder['service'], holder['host']) if holder
                else None), _keys(values['keys'])
    except OSError as exc:
        raise exception.ConfigurationError(
            reason='cannot read the RPC signing key %s (%s): create it with '
                   '"volmig-manage key create", or export a host\'s with '
                   '"volmig-manage key export"' % (path, exc.strerror))
    except (ValueError, KeyError, TypeError) as exc:
        raise exception.ConfigurationError(
            reason='%s is not a volmig key file (%s)' % (path, exc))


def write(path: str, holder: Sender | None, keys: list[Key]) -> None:
    """Written 0600 in one rename: a reader sees the old file or the new."""
    body = {'version': VERSION, 'keys': [
        {'id': key.id, 'secret': base64.b64encode(key.secret).decode(),
         'signs_from': key.signs_from, 'expires': key.expires}
        for key in keys]}
    if holder is not None:
        body['holder'] = holder._asdict()
    atomic_file.write_json(path, body)


def create(path: str) -> None:
    """A new master key file: key 1, which signs from now."""
    write(path, None, [new_key(1, time.time())])


def new_key(key_id: int, signs_from: float) -> Key:
    return Key(key_id, os.urandom(KEY_BYTES), signs_from, None)


def read_master(path: str) -> list[Key]:
    """The master keys in ``path``; a host's key file is refused."""
    holder, keys = read(path)
    if holder is not None:
        raise exception.ConfigurationError(
            reason='%s holds the key of %s on "%s", not the master key: run '
                   'this on a controller' % (path, holder.service,
                                             holder.host))
    return keys


def export(master_file: str, service: str, host: str, path: str) -> None:
    """Writes ``service``'s own keys on ``host`` to ``path``: each usable
    master key's, derived for it."""
    keys = read_master(master_file)
    write(path, Sender(service, host), [
        key._replace(secret=derive(key.secret, service, host))
        for key in usable(keys, time.time())])


def usable(keys: list[Key], now: float) -> list[Key]:
    return [key for key in keys
            if key.expires is None or now < key.expires]


class Keyring:
    """One process's keys, read again when their file changes."""

    def __init__(self, path: str, host: str):
        self.path = path
        self._host = host
        self._lock = threading.Lock()
        self._stat: tuple | None = None
        self._checked = 0.0
        self._load()

    def _load(self) -> None:
        self.holder, self._keys = read(self.path)
        stat = os.stat(self.path)
        self._stat = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if not usable(self._keys, time.time()):
            raise exception.ConfigurationError(
                reason='every key in %s has expired' % self.path)

    def _fresh(self) -> list[Key]:
        now = time.monotonic()
        if now - self._checked >= _RELOAD_CHECK:
            with self._lock:
                self._checked = now
                try:
                    stat = os.stat(self.path)
                    if (stat.st_mtime_ns, stat.st_size,
                            stat.st_ino) != self._stat:
                        self._load()
                        LOG.info('RPC signing keys read again from %s',
                                 self.path)
                except (OSError, exception.ConfigurationError) as exc:
                    LOG.error('Keeping the RPC signing keys in use: %s',
                              exception.safe_message(exc))
        return self._keys

    @property
    def identity(self) -> Sender:
        return self.holder or Sender(CONTROLLER, self._host)

    def signing_key(self) -> Key:
        """The newest key whose time to sign has come."""
        now = time.time()
        keys = usable(self._fresh(), now)
        ready = [key for key in keys if key.signs_from <= now]
        return (ready or keys)[-1]

    def key(self, key_id: int) -> Key | None:
        for key in usable(self._fresh(), time.time()):
            if key.id == key_id:
                return key
        return None

    def sealing(self, topic: str, server) -> tuple[Key, bytes]:
        """The key, and its secret, that sign a message to (topic,
        server): a host's own, whatever the target."""
        key = self.signing_key()
        if self.holder is not None:
            return key, key.secret
        return key, derive(key.secret, *_key_identity(self.identity, topic,
                                                      server))

    def secret(self, key: Key, service: str, host: str) -> bytes | None:
        """The secret for (service, host), if this keyring holds it."""
        if self.holder is None:
            return derive(key.secret, service, host)
        if (service, host) == tuple(self.holder):
            return key.secret
        return None


def _key_identity(claim: Sender, topic: str, server) -> tuple[str, str]:
    """Whose key signs a message from ``claim`` to (topic, server)."""
    if claim.service != CONTROLLER:
        return claim.service, claim.host
    service = _KEYED_TOPICS.get(topic, CONTROLLER)
    return service, (server or '') if service == COMPUTE else ''


def _canonical(value) -> bytes:
    # What the receiver rebuilds from JSON: tuples are lists, keys strings.
    plain = json.loads(jsonutils.dumps(value))
    return json.dumps(plain, sort_keys=True, separators=(',', ':')).encode()


def _mac(secret: bytes, seal: dict, topic: str, ctxt: dict,
         message: dict) -> str:
    """Over the seal (with the server it was sent to), the topic, the
    message and the context's signed fields (the transport adds its own,
    ``client_timeout``, on the way)."""
    body = [VERSION, seal['key'], seal['service'], seal['host'], seal['ts'],
            seal['nonce'], topic, seal['server'], seal['fields'],
            [ctxt.get(field) for field in seal['fields']],
            message.get('method'), message.get('namespace'),
            message.get('version'), message.get('args', {})]
    return hmac.new(secret, _canonical(body), hashlib.sha256).hexdigest()


def sign(keyring: Keyring, topic: str, server, ctxt: dict,
         message: dict) -> dict:
    """``ctxt`` with the signature of the message to (topic, server)."""
    claim = keyring.identity
    key, secret = keyring.sealing(topic, server)
    seal = {'v': VERSION, 'key': key.id, 'service': claim.service,
            'host': claim.host, 'ts': time.time(),
            'nonce': uuid.uuid4().hex, 'server': server,
            'fields': sorted(field for field in ctxt if field != SIGNATURE)}
    seal['mac'] = _mac(secret, seal, topic, ctxt, message)
    return dict(ctxt, **{SIGNATURE: seal})


class Checker:
    """Checks each message a server takes: its signature, its sender and
    its freshness; remembers nonces for ``max_age``."""

    def __init__(self, keyring: Keyring, topic: str, server: str,
                 conf):
        self._keyring = keyring
        self._topic = topic
        self._server = server
        self._conf = conf
        self._nonces: set[str] = set()
        # (until, nonce), oldest first: what to forget, and when.
        self._order: collections.deque = collections.deque()
        self._lock = threading.Lock()

    def check(self, ctxt: dict, message: dict) -> Sender | None:
        """The sender the signature proves (None: an unsigned message the
        operator allows); raises ``MessageRefused``."""
        seal = ctxt.get(SIGNATURE)
        method = message.get('method')
        if not isinstance(seal, dict):
            if self._conf.signing.allow_unsigned:
                return None
            refuse(method, None, 'unsigned', 'unsigned')
        try:
            claim = Sender(str(seal['service']), str(seal['host']))
            key_id, sent, nonce, mac = (int(seal['key']), float(seal['ts']),
                                        str(seal['nonce']), str(seal['mac']))
            fields = [str(field) for field in seal['fields']]
            server = seal['server']
        except (KeyError, TypeError, ValueError):
            refuse(method, None, 'malformed', 'malformed signature')
        if abs(time.time() - sent) > self._conf.signing.max_age:
            refuse(method, claim, 'stale', 'stale: sent %.0f s ago'
                   % (time.time() - sent))
        key = self._keyring.key(key_id)
        if key is None:
            refuse(method, claim, 'unknown-key', 'unknown key %d' % key_id)
        # Sent to this server, or to any of the topic's.
        secret = (self._keyring.secret(key, *_key_identity(
            claim, self._topic, server))
            if server in (None, self._server) else None)
        if secret is None or not hmac.compare_digest(
                mac, _mac(secret, seal, self._topic, ctxt, message)):
            refuse(method, claim, 'forged',
                   'forged: the signature does not match')
        self._remember(nonce, method, claim)
        # Only what the sender signed goes on to the method.
        for field in set(ctxt) - set(fields) - {SIGNATURE}:
            del ctxt[field]
        return claim

    def _remember(self, nonce: str, method, claim: Sender) -> None:
        """Each nonce is kept while its message may still be taken: up
        to ``max_age`` either side of this clock, so twice that."""
        now = time.monotonic()
        with self._lock:
            while self._order and self._order[0][0] <= now:
                self._nonces.discard(self._order.popleft()[1])
            seen = nonce in self._nonces
            if not seen:
                self._nonces.add(nonce)
                self._order.append(
                    (now + 2 * self._conf.signing.max_age, nonce))
        if seen:
            refuse(method, claim, 'replayed', 'replayed')


_logged: set = set()
_LOGGED_MOST = 4096


def refuse(method, claim: Sender | None, kind: str,
           reason: str) -> typing.NoReturn:
    """Raises ``MessageRefused``: logged once per sender and ``kind``
    (unsigned, malformed, stale, forged, unknown-key, replayed, method,
    host), counted every time."""
    who = '%s on %s' % claim if claim else 'an unknown sender'
    metrics.RPC_REFUSED.labels(sender=claim.service if claim else 'unknown',
                               reason=kind).inc()
    # A forger names any sender it likes: the set stays bounded.
    if (claim, kind) not in _logged and len(_logged) < _LOGGED_MOST:
        _logged.add((claim, kind))
        LOG.warning('Refused RPC %(method)s from %(who)s: %(reason)s '
                    '(logged once per sender and reason)',
                    {'method': method, 'who': who, 'reason': reason})
    raise exception.MessageRefused(method=method, sender=who,
                                   reason=reason)


def speaks_for(ctxt, host: str) -> bool:
    """Whether ``ctxt``'s sender may report on ``host``'s records: a
    controller, a message the operator lets in unsigned (no sender), and
    a host about itself. volmig-volume's key is every volmig-volume's, so
    it speaks for any host of its kind."""
    sender = getattr(ctxt, 'sender', None)
    return (sender is None or sender.service == CONTROLLER
            or sender.host in ('', host))


def check_host(ctxt, host: str, method: str) -> None:
    if not speaks_for(ctxt, host):
        refuse(method, ctxt.sender, 'host',
               'a host reports on its own records only')

"""Key files, and the keys a process signs and checks with.

A master key file holds the controllers' secrets; a host's key file names
its holder (kind, host, generation) and holds the secrets derived for it
from each usable master key. A key signs as what it is, nothing else: a
service refuses to start with a key of another kind or host
(``Keyring.require``).
"""

import base64
import collections
import hashlib
import hmac
import json
import os
import threading
import time

from oslo_log import log as logging

from volmig import atomic_file
from volmig import exception
from volmig import signing
from volmig.signing import registry as registry_mod

LOG = logging.getLogger(__name__)

# 2: a host's key names the generation it was exported with.
VERSION = 2
KEY_BYTES = 32
# How often a key file is looked at for a change, in seconds.
_RELOAD_CHECK = 1.0
# Derived secrets a controller keeps: every host's, under a few keys.
_DERIVED_MOST = 65536

Key = collections.namedtuple('Key', 'id secret signs_from expires')
# A host key's holder: its kind, its name, and its generation.
Holder = collections.namedtuple('Holder', 'service host generation')


def derive(master: bytes, service: str, host: str,
           generation: str) -> bytes:
    label = ('volmig-rpc-2\0%s\0%s\0%s' % (service, host, generation))
    return hmac.new(master, label.encode(), hashlib.sha256).digest()


def key_file(conf) -> str:
    """The configured key file, else systemd's credential, else the
    default path."""
    if conf.signing.key_file:
        return conf.signing.key_file
    credentials = os.environ.get('CREDENTIALS_DIRECTORY')
    if credentials and os.path.exists(os.path.join(credentials,
                                                   signing.CREDENTIAL)):
        return os.path.join(credentials, signing.CREDENTIAL)
    return signing.DEFAULT_KEY_FILE


def _keys(values: list) -> list[Key]:
    return sorted((Key(int(key['id']), base64.b64decode(key['secret']),
                       float(key['signs_from']), key.get('expires'))
                   for key in values), key=lambda key: key.id)


def read(path: str) -> tuple[Holder | None, list[Key]]:
    """A key file's holder (None: the master) and keys."""
    try:
        with open(path) as stream:
            values = json.load(stream)
        holder = values.get('holder')
        if holder and 'generation' not in holder:
            raise exception.ConfigurationError(
                reason='%s holds a key of an earlier release: export the '
                       'key of %s on "%s" again ("volmig-manage key '
                       'export")' % (path, holder['service'],
                                     holder['host']))
        return (Holder(holder['service'], holder['host'],
                       holder['generation']) if holder else None,
                _keys(values['keys']))
    except OSError as exc:
        raise exception.ConfigurationError(
            reason='cannot read the RPC signing key %s (%s): create it with '
                   '"volmig-manage key create", or export a host\'s with '
                   '"volmig-manage key export"' % (path, exc.strerror))
    except (ValueError, KeyError, TypeError) as exc:
        raise exception.ConfigurationError(
            reason='%s is not a volmig key file (%s)' % (path, exc))


def write(path: str, holder: Holder | None, keys: list[Key]) -> None:
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


def export(master_file: str, holder: Holder, path: str) -> None:
    """Writes ``holder``'s own keys to ``path``: each usable master key's,
    derived for its kind, name and generation."""
    keys = read_master(master_file)
    write(path, holder, [
        key._replace(secret=derive(key.secret, *holder))
        for key in usable(keys, time.time())])


def usable(keys: list[Key], now: float) -> list[Key]:
    return [key for key in keys
            if key.expires is None or now < key.expires]


def _described(holder: Holder | None) -> str:
    return ('the master key' if holder is None else
            'the key of %s on "%s"' % (holder.service, holder.host))


class Keyring:
    """One process's keys, read again when their file changes.

    A controller's (the master key) derives each host's key from the
    generation that ``registry`` records for it.
    """

    def __init__(self, path: str, host: str,
                 registry: registry_mod.Registry | None = None):
        self.path = path
        self._host = host
        self.registry = registry
        # Derived secrets, by key, host and generation: a controller
        # derives each host's once, not for every message.
        self._derived: dict = {}
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

    def require(self, service: str, host: str | None = None) -> None:
        """Refuses a key that would sign as anything but ``service`` on
        ``host`` (any host: None): a master key on a host, whose holder
        could speak for the controllers; a host's key on a controller, or
        on another host or kind."""
        holder = self.holder
        if service == signing.CONTROLLER:
            fits = holder is None
            who, wanted = 'a controller', 'the master key'
        else:
            fits = holder is not None and holder.service == service and (
                host is None or holder.host == host)
            who = service + (' on %s' % host if host else '')
            wanted = 'its own key ("volmig-manage key export --service ' \
                '%s%s")' % (service, ' --host %s' % host if host else '')
        if not fits:
            raise exception.ConfigurationError(
                reason='%s needs %s, and %s holds %s' % (
                    who, wanted, self.path, _described(holder)))

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
    def identity(self) -> signing.Sender:
        if self.holder is None:
            return signing.Sender(signing.CONTROLLER, self._host)
        return signing.Sender(self.holder.service, self.holder.host)

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

    def generation(self, service: str, host: str) -> str | None:
        """The generation of (service, host)'s key that this keyring
        knows: a host knows its own, a controller every registered one
        (the controllers' own is ``''``)."""
        if service == signing.CONTROLLER:
            return '' if self.holder is None else None
        if self.holder is not None:
            return (self.holder.generation
                    if (service, host) == (self.holder.service,
                                           self.holder.host) else None)
        return self.registry.generation(service, host) if self.registry \
            else None

    def secret(self, key: Key, service: str, host: str) -> bytes | None:
        """The secret that seals what passes between the controllers and
        (service, host) under ``key``, if this keyring holds it."""
        generation = self.generation(service, host)
        if generation is None:
            return None
        if self.holder is not None:
            return key.secret
        cached = (key.id, key.secret, service, host, generation)
        secret = self._derived.get(cached)
        if secret is None:
            if len(self._derived) > _DERIVED_MOST:
                self._derived.clear()
            secret = self._derived[cached] = derive(key.secret, service,
                                                    host, generation)
        return secret

    def hosts(self, service: str) -> list[str]:
        """The hosts of ``service`` that hold a key, as far as this
        keyring knows."""
        if self.holder is not None:
            return [self.holder.host] if self.holder.service == service \
                else []
        return self.registry.hosts(service) if self.registry else []

    def signs(self, service: str, host: str) -> bool:
        """Whether (service, host) holds a key: then only what it signs
        speaks for it."""
        return self.generation(service, host) is not None

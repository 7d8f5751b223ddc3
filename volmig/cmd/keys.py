"""volmig-manage's key commands: the RPC signing keys (``volmig.signing``).

The master key lives on the controllers (volmig-api, volmig-conductor,
volmig-manage); every host gets a key of its own, derived from it, and
recorded in the database (``volmig.db.host_keys``) so that it can be
revoked alone.
"""

import datetime
import os
import time

from volmig import exception
from volmig import signing
from volmig.conf import CONF
from volmig.db import host_keys
from volmig.signing import keys


def _when(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(
        epoch, datetime.UTC).strftime('%Y-%m-%d %H:%M:%S UTC')


def create() -> None:
    path = CONF.category.to or keys.key_file(CONF)
    if os.path.exists(path):
        raise exception.ConfigurationError(
            reason='%s exists: "volmig-manage key rotate" replaces its key'
                   % path)
    keys.create(path)
    print('master key 1 written to %s (mode 0600); copy it to every '
          'controller, and export each host\'s key from it' % path)


def rotate() -> None:
    """A new key, used to sign ``window`` seconds from now; the keys it
    replaces are accepted for another ``window`` after that."""
    path = keys.key_file(CONF)
    current = keys.read_master(path)
    now, window = time.time(), CONF.category.window
    kept = [key._replace(expires=key.expires or now + 2 * window)
            for key in keys.usable(current, now)]
    new = keys.new_key(max(key.id for key in current) + 1, now + window)
    keys.write(path, None, kept + [new])
    print('key %d signs from %s; keys %s are accepted until %s. Before '
          'then, copy %s to every controller and export every host\'s key '
          'again ("volmig-manage key export --same-generation"): services '
          'read their key files again when they change.' % (
              new.id, _when(new.signs_from),
              ', '.join(str(key.id) for key in kept), _when(now + 2 * window),
              path))


def export() -> None:
    command = CONF.category
    master = keys.key_file(CONF)
    # The master key first: a command that cannot write the key records
    # no generation that no key holds.
    keys.read_master(master)
    generation = host_keys.register(command.service, command.on_host,
                                    keep=command.same_generation)
    keys.export(master, keys.Holder(command.service, command.on_host,
                                    generation), command.to)
    print('key of %s on %s written to %s (mode 0600); give it to that host '
          'alone ([signing] key_file, or systemd\'s credential %s)%s' % (
              command.service, command.on_host, command.to,
              signing.CREDENTIAL,
              '' if command.same_generation else
              '. Any key it had before is refused from now on'))


def revoke() -> None:
    command = CONF.category
    host_keys.revoke(command.service, command.on_host)
    print('the key of %s on %s is revoked: its messages are refused within '
          'a second' % (command.service, command.on_host))


def list_hosts() -> None:
    for record in host_keys.get_all():
        print('%-16s %-32s exported %s' % (
            record['service'], record['host'],
            record['updated_at'] or record['created_at']))

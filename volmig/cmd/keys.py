"""volmig-manage's key commands: the RPC signing keys (``volmig.signing``).

The master key lives on the controllers (volmig-api, volmig-conductor,
volmig-manage); every other service gets a key derived for it.
"""

import datetime
import os
import time

from volmig import exception
from volmig import signing
from volmig.conf import CONF


def _when(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(
        epoch, datetime.UTC).strftime('%Y-%m-%d %H:%M:%S UTC')


def create() -> None:
    path = CONF.category.to or signing.key_file(CONF)
    if os.path.exists(path):
        raise exception.ConfigurationError(
            reason='%s exists: "volmig-manage key rotate" replaces its key'
                   % path)
    signing.create(path)
    print('master key 1 written to %s (mode 0600); copy it to every '
          'controller, and export each host\'s key from it' % path)


def rotate() -> None:
    """A new key, used to sign ``window`` seconds from now; the keys it
    replaces are accepted for another ``window`` after that."""
    path = signing.key_file(CONF)
    keys = signing.read_master(path)
    now, window = time.time(), CONF.category.window
    kept = [key._replace(expires=key.expires or now + 2 * window)
            for key in signing.usable(keys, now)]
    new = signing.new_key(max(key.id for key in keys) + 1, now + window)
    signing.write(path, None, kept + [new])
    print('key %d signs from %s; keys %s are accepted until %s. Before '
          'then, copy %s to every controller and export every host\'s key '
          'again ("volmig-manage key export"): services read their key '
          'files again when they change.' % (
              new.id, _when(new.signs_from),
              ', '.join(str(key.id) for key in kept), _when(now + 2 * window),
              path))


def export() -> None:
    command = CONF.category
    host = '' if command.service == signing.VOLUME else command.on_host
    if not host and command.service != signing.VOLUME:
        raise exception.ConfigurationError(
            reason='--host is required for %s' % command.service)
    signing.export(signing.key_file(CONF), command.service, host,
                   command.to)
    print('key of %s%s written to %s (mode 0600); give it to that service '
          'alone ([signing] key_file, or systemd\'s credential %s)' % (
              command.service, ' on %s' % host if host else '', command.to,
              signing.CREDENTIAL))

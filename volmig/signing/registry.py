"""Which hosts hold a key, as the controllers know it.

The controllers record each host's key generation in the database when
they export its key, and forget it when they revoke it
(``volmig.db.host_keys``). Each controller process reads the whole record
again at most once a ``REFRESH``, when it next needs it: a revocation
holds everywhere within that, with no cost per message.
"""

import threading
import time
import typing

from oslo_log import log as logging

from volmig import exception

LOG = logging.getLogger(__name__)

REFRESH = 1.0


class Registry:
    """``load()`` returns ``{(service, host): generation}``."""

    def __init__(self, load: typing.Callable[[], dict]):
        self._load = load
        self._lock = threading.Lock()
        self._hosts: dict = {}
        self._read = float('-inf')

    def _current(self) -> dict:
        if time.monotonic() - self._read >= REFRESH:
            with self._lock:
                if time.monotonic() - self._read >= REFRESH:
                    self._refresh()
        return self._hosts

    def _refresh(self) -> None:
        try:
            self._hosts = self._load()
        except Exception as exc:
            # The database away: keep what was read, and say so once per
            # refresh; with nothing read yet, no host is known.
            LOG.error('Keeping the hosts\' signing keys as last read: %s',
                      exception.safe_message(exc))
        self._read = time.monotonic()

    def generation(self, service: str, host: str) -> str | None:
        return self._current().get((service, host))

    def hosts(self, service: str) -> list[str]:
        return sorted(host for kind, host in self._current()
                      if kind == service)

    def forget(self) -> None:
        """Read the record again at the next use (after this process
        changed it)."""
        self._read = float('-inf')

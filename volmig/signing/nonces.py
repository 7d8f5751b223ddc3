"""Where a server remembers the nonces of the messages it took.

A message may be taken once, by one server, while it is fresh. So its
nonce is kept, until the message would be stale anyway, where every
server that could take it again looks:

- the services that have a database (volmig-api, volmig-conductor,
  volmig-volume) serve topics that several processes share, and keep
  nonces there (``volmig.db.nonces``): one process restarted, or another
  of the same topic, sees them;
- a compute agent serves its own host's queue alone, and has no database:
  ``Journal`` keeps its nonces in a file under its state directory.

Each store has ``remember(nonce, until) -> bool`` (False: seen before)
and ``not_before``: messages sent earlier are refused, for the store may
have lost what it saw of them.
"""

import os
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

_BOOT_ID = '/proc/sys/kernel/random/boot_id'


def _boot_id() -> str:
    try:
        with open(_BOOT_ID) as boot:
            return boot.read().strip()
    except OSError:
        return 'unknown'


class Memory:
    """One process's memory: for tests, and for what outlives nothing."""

    not_before = 0.0

    def __init__(self):
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()
        self._purged = time.time()

    def _purge(self, now: float) -> None:
        self._until = {nonce: until for nonce, until in self._until.items()
                       if until > now}
        self._purged = now

    def remember(self, nonce: str, until: float) -> bool:
        with self._lock:
            now = time.time()
            # Forgotten in bulk once the oldest may have aged: each
            # message costs a dictionary write, not a scan.
            if now - self._purged > 60:
                self._purge(now)
            if nonce in self._until:
                return False
            self._until[nonce] = until
            return True

    def __len__(self) -> int:
        return len(self._until)


class Journal(Memory):
    """Nonces in memory, and appended to ``path`` before the message is
    served, so that the agent's next process knows them.

    The file is written without a flush to the disk: a process that
    restarts reads it back from the page cache. A host that rebooted may
    have lost its last lines, so after a reboot (a new boot id) the
    messages sent before the agent started are refused; the conductor's
    reconciliation settles what they asked.
    """

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        boot, entries = self._read()
        now = time.time()
        self._until = {nonce: until for nonce, until in entries.items()
                       if until > now}
        if boot != _boot_id():
            self.not_before = now
            if entries:
                LOG.warning('This host restarted since %s was written: '
                            'messages sent before now are refused',
                            path)
        self._fd = -1
        self._rewrite()

    def _read(self) -> tuple[str | None, dict[str, float]]:
        entries: dict[str, float] = {}
        try:
            with open(self.path) as journal:
                first = journal.readline().split()
                boot = first[1] if first[:1] == ['boot'] else None
                for line in journal:
                    parts = line.split()
                    try:
                        entries[parts[1]] = float(parts[0])
                    except (IndexError, ValueError):
                        continue  # a line cut short by a crash
        except FileNotFoundError:
            return _boot_id(), entries
        return boot, entries

    def _rewrite(self) -> None:
        """The live nonces only, in one rename."""
        temporary = self.path + '.new'
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'w') as journal:
            journal.write('boot %s\n' % _boot_id())
            for nonce, until in self._until.items():
                journal.write('%.3f %s\n' % (until, nonce))
        os.rename(temporary, self.path)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._lines = len(self._until)

    def _purge(self, now: float) -> None:
        super()._purge(now)
        if self._lines > 2 * len(self._until) + 1000:
            self._rewrite()

    def remember(self, nonce: str, until: float) -> bool:
        if not super().remember(nonce, until):
            return False
        with self._lock:
            os.write(self._fd, b'%.3f %s\n' % (until, nonce.encode()))
            self._lines += 1
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

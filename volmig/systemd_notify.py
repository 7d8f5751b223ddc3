"""systemd's notify protocol: READY=1, STOPPING=1 and the watchdog.

``claim()`` takes ``NOTIFY_SOCKET`` out of the environment before the
service launcher runs: oslo.service's eventlet launcher would otherwise
send READY=1 as soon as it starts the service's thread, before the RPC
server consumes. Children (QEMU guests) do not inherit it either.
"""

import os
import socket
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class Notifier:
    """Sends states to the socket systemd named; a no-op without one."""

    def __init__(self, address: str | None, watchdog_usec: int | None):
        if address and address.startswith('@'):
            address = '\0' + address[1:]
        self.address = address
        self.watchdog_interval = (watchdog_usec / 2e6 if watchdog_usec
                                  else None)
        self._sent: set[str] = set()
        self._lock = threading.Lock()

    def send(self, state: str) -> None:
        if not self.address:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect(self.address)
                sock.sendall(state.encode())
            except OSError as exc:
                LOG.warning('systemd notification %s failed: %s', state, exc)

    def send_once(self, state: str) -> None:
        with self._lock:
            if state in self._sent:
                return
            self._sent.add(state)
        self.send(state)

    def ready(self) -> None:
        self.send_once('READY=1')

    def stopping(self) -> None:
        self.send_once('STOPPING=1')

    def watchdog(self) -> None:
        self.send('WATCHDOG=1')


def claim() -> Notifier:
    """The notifier systemd set up for this process, taken from the
    environment (WATCHDOG_PID, when set, must be this process)."""
    address = os.environ.pop('NOTIFY_SOCKET', None)
    usec = os.environ.pop('WATCHDOG_USEC', None)
    watchdog_pid = os.environ.pop('WATCHDOG_PID', None)
    if watchdog_pid and int(watchdog_pid) != os.getpid():
        usec = None
    return Notifier(address, int(usec) if usec else None)

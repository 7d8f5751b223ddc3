"""The libvirt driver's connection to libvirtd, and its events.

libvirtd may go away at any moment while QEMU runs on: each call reaches
it on a connection made again once it is back (``restarts`` takes a step
cut short again), and counts the connections, so that a failed call can
tell a libvirtd that went away from one that refused. libvirt's event
loop runs once per process; a guest that stops by itself is reported to
the agent from it.
"""

import contextlib
import threading
import typing

import libvirt
from oslo_log import log as logging

from volmig import exception
from volmig.compute.drivers.libvirt import domain

LOG = logging.getLogger(__name__)

_EVENTS: threading.Thread | None = None
_EVENTS_LOCK = threading.Lock()


def _run_events() -> None:
    while True:
        libvirt.virEventRunDefaultImpl()


def _start_events() -> None:
    """libvirt's event loop, once per process, before any connection."""
    global _EVENTS
    with _EVENTS_LOCK:
        if _EVENTS is None:
            # Errors reach the driver as exceptions; libvirt's default
            # handler would also print each to stderr.
            libvirt.registerErrorHandler(lambda *_: None, None)
            libvirt.virEventRegisterDefaultImpl()
            _EVENTS = threading.Thread(target=_run_events, daemon=True,
                                       name='libvirt-events')
            _EVENTS.start()


def failed(action: str, exc: libvirt.libvirtError) -> exception.DriverError:
    return exception.DriverError(action=action,
                                 reason=exc.get_error_message())


class Libvirtd:
    """The connection part of ``driver.LibvirtDriver``."""

    if typing.TYPE_CHECKING:
        conf: typing.Any
        _guests: dict[str, domain.Guest]
        power_listener: typing.Any

    def __init__(self, conf):
        super().__init__(conf)
        self._connection: libvirt.virConnect | None = None
        # How many times libvirtd was connected: a call that failed on an
        # older connection failed because libvirtd went away.
        self.connections = 0
        self._connecting = threading.Lock()

    def connection(self) -> libvirt.virConnect:
        """libvirtd, connected again after it restarted."""
        with self._connecting:
            if self._connection is None or not self._connection.isAlive():
                if self._connection is not None:
                    # libvirtd went away: what it held is gone with it.
                    with contextlib.suppress(libvirt.libvirtError):
                        self._connection.close()
                    self._connection = None
                _start_events()
                try:
                    connection = libvirt.open(self.conf.libvirt.uri)
                except libvirt.libvirtError as exc:
                    raise failed('connect to %s' % self.conf.libvirt.uri,
                                 exc)
                connection.domainEventRegisterAny(
                    None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                    self._lifecycle, None)
                self._connection = connection
                self.connections += 1
            return self._connection

    def answers(self) -> bool:
        """Whether libvirtd answers, on a new connection if need be."""
        try:
            # A call that goes to the daemon: some answer from the client.
            self.connection().numOfDomains()
        except (libvirt.libvirtError, exception.DriverError):
            return False
        return True

    def live_domain(self, guest: domain.Guest) -> libvirt.virDomain | None:
        """The guest's running domain, or None."""
        try:
            found = self.connection().lookupByUUIDString(guest.uuid)
            # A transient domain that stops is gone: between the two calls
            # too.
            return found if found.isActive() else None
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise failed('look up guest %s' % guest.uuid, exc)

    def is_running(self, guest: domain.Guest) -> bool:
        return self.live_domain(guest) is not None

    def _lifecycle(self, connection, dom, event, detail, opaque) -> None:
        # A destroy is the agent's own doing, recorded by whoever sent it.
        if (event != libvirt.VIR_DOMAIN_EVENT_STOPPED
                or detail == libvirt.VIR_DOMAIN_EVENT_STOPPED_DESTROYED
                or self.power_listener is None):
            return
        uuid = dom.UUIDString()
        if uuid in self._guests:
            # Not on libvirt's event thread: the listener makes RPC calls.
            threading.Thread(target=self._report_off, args=(uuid,),
                             name='shutdown-%s' % uuid, daemon=True).start()

    def _report_off(self, uuid: str) -> None:
        listener = self.power_listener
        if listener is None:
            return
        try:
            listener(uuid)
        except Exception:
            # The periodic sync records it later.
            LOG.exception('Recording that guest %s powered off failed', uuid)

    def cleanup_host(self):
        with self._connecting:
            if self._connection is not None:
                try:
                    self._connection.close()
                except libvirt.libvirtError:
                    pass
                self._connection = None

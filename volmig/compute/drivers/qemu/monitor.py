"""QMP monitors of the guests, all served by one asyncio loop thread.

``qemu.qmp``'s client is asyncio; the agent is threaded. One loop thread
runs every monitor, and threads submit commands to it. A lock per monitor
keeps one command in flight per socket: replies of two interleaved users
of one socket are a real hazard (doc/source/design.rst, "Compute drivers").
"""

import asyncio
import contextlib
import threading
import time

from oslo_log import log as logging
from qemu.qmp import events
from qemu.qmp import protocol
from qemu.qmp import qmp_client

from volmig import exception

LOG = logging.getLogger(__name__)


class EventLoop:
    """A daemon thread running an asyncio loop for the monitors."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever,
                                        name='qmp-loop', daemon=True)
        self._thread.start()

    def run(self, coroutine, timeout: float):
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()


class Monitor:

    def __init__(self, loop: EventLoop, socket_path: str, guest: str,
                 timeout: float):
        self._loop = loop
        self._socket_path = socket_path
        self._guest = guest
        self._timeout = timeout
        self._client = qmp_client.QMPClient(guest)
        self._lock = threading.Lock()
        self._reader: asyncio.Task | None = None

    def connect(self, on_event=None) -> None:
        """Connect; ``on_event(name, data)`` is called in the loop thread
        for every event, so it must not block."""
        try:
            self._loop.run(self._client.connect(self._socket_path),
                           self._timeout)
        except (protocol.ConnectError, OSError, EOFError) as exc:
            raise exception.MonitorError(command='connect',
                                         guest=self._guest,
                                         reason=str(exc) or repr(exc))
        self._reader = self._loop.run(self._start_reader(on_event),
                                      self._timeout)

    async def _start_reader(self, on_event) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(
            self._read_events(on_event))

    async def _read_events(self, on_event) -> None:
        # The client's default listener keeps every event until it is
        # read: an agent that runs for years must read them all.
        async for event in self._client.events:
            if on_event is not None:
                try:
                    on_event(event['event'], event.get('data') or {})
                except Exception:
                    LOG.exception('Handling QMP event %s of guest %s '
                                  'failed', event['event'], self._guest)

    def execute(self, command: str, fd: int | None = None, **arguments):
        """Run a command; ``fd``, if given, is passed with it (SCM_RIGHTS)
        for commands that take one, such as ``add-fd`` and ``getfd``."""
        async def run():
            if fd is not None:
                self._client.send_fd_scm(fd)
            return await self._client.execute(command, arguments or None)

        with self._lock:
            try:
                return self._loop.run(run(), self._timeout)
            except qmp_client.ExecuteError as exc:
                raise exception.MonitorError(command=command,
                                             guest=self._guest,
                                             reason=str(exc))

    def timed(self, command: str, **arguments) -> float:
        """Run a command and return its round trip in milliseconds.

        For the steps that drain guest I/O, the round trip is the pause
        the guest sees.
        """
        began = time.perf_counter()
        self.execute(command, **arguments)
        elapsed = (time.perf_counter() - began) * 1000
        LOG.debug('%s on guest %s took %.2f ms', command, self._guest,
                  elapsed)
        return elapsed

    @contextlib.contextmanager
    def listening(self, name: str):
        """Collect events ``name`` from here on; yields a wait function.

        Listening starts before the command that causes the event, so a
        quick event is not missed.
        """
        listener = events.EventListener(name)

        async def register():
            self._client.register_listener(listener)

        async def unregister():
            self._client.remove_listener(listener)

        async def next_matching(accept):
            while True:
                event = await listener.get()
                if accept(event.get('data') or {}):
                    return event

        def wait(accept, timeout: float) -> bool:
            try:
                self._loop.run(asyncio.wait_for(next_matching(accept),
                                                timeout), timeout + 5)
            except TimeoutError:
                return False
            return True

        self._loop.run(register(), self._timeout)
        try:
            yield wait
        finally:
            self._loop.run(unregister(), self._timeout)

    def close(self) -> None:
        if self._reader is not None:
            self._loop.loop.call_soon_threadsafe(self._reader.cancel)
            self._reader = None
        try:
            self._loop.run(self._client.disconnect(), self._timeout)
        except (EOFError, OSError):
            # QEMU closes the socket first after "quit".
            pass

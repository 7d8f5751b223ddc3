"""One volmig service: an RPC server, a manager, heartbeats and timers."""

import logging as logging_std
import os
import sys
import threading
import typing

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_reports import guru_meditation_report as gmr
from oslo_service import backend
from oslo_service import service
from oslo_utils import importutils

from volmig import context as volmig_context
from volmig import exception
from volmig import metrics
from volmig import owners
from volmig import rpc
from volmig import signing
from volmig import systemd_notify
from volmig import version
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.db import services as service_db
from volmig.volume_service import rpcapi as storage_rpcapi

LOG = logging.getLogger(__name__)

API = 'volmig-api'
CONDUCTOR = 'volmig-conductor'
COMPUTE = compute_rpcapi.BINARY
VOLUME = 'volmig-volume'

# Each process imports its own manager alone: a process pays for every
# module it imports each time it starts, and an agent has no use for the
# conductor's, volmig-api's or volmig-volume's (about a tenth of its
# start).
_KINDS: dict[str, tuple[str, str]] = {
    API: (API, 'volmig.api.manager.APIManager'),
    CONDUCTOR: (conductor_rpcapi.TOPIC,
                'volmig.conductor.manager.ConductorManager'),
    COMPUTE: (compute_rpcapi.TOPIC, 'volmig.compute.manager.ComputeManager'),
    VOLUME: (storage_rpcapi.TOPIC,
             'volmig.volume_service.manager.VolumeManager'),
}


class Service(service.Service):
    """Serves a manager on ``topic`` (server = host) and reports liveness.

    The service record (version and capabilities) is written only once
    the RPC server listens: on RabbitMQ a message sent to a queue that does
    not exist yet is lost, so a registered service must be reachable. It
    is ready once the first heartbeat is recorded.
    """

    def __init__(self, binary: str, host: str | None = None):
        super().__init__()
        rpc.init()
        self.binary = binary
        self.host = host or CONF.host
        if binary in (COMPUTE, VOLUME) and \
                rpc.transport().keyring.holder is None:
            # A process that holds the master key and serves a host
            # itself (the embedded default) records that host's key, as
            # an export would: the controllers seal what they send it.
            rpc.register_host(binary, self.host)
        self.topic, manager_class = _KINDS[binary]
        manager = importutils.import_class(manager_class)
        # An agent reports to its conductor through the client its service
        # gives it: the compute package imports nothing of the conductor's,
        # which imports the agent's client.
        self.manager = (manager(self.host, conductor_rpcapi.ConductorAPI())
                        if binary == COMPUTE else manager(self.host))
        self._report = (service_db.update if binary == CONDUCTOR
                        else conductor_rpcapi.ConductorAPI().service_update)
        self._servers: list[typing.Any] = []
        self._ready = threading.Event()

    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def start(self) -> None:
        LOG.info('Starting %(binary)s on %(host)s (concurrency: %(backend)s)',
                 {'binary': self.binary, 'host': self.host,
                  'backend': backend.get_backend_type().value})
        self.manager.init_host()
        # A manager may serve several topics (the conductor's operator
        # calls have their own); most serve one.
        topics = getattr(self.manager, 'rpc_topics',
                         lambda: {self.topic: [self.manager]})()
        self._servers = [rpc.get_server(topic, self.host, endpoints)
                         for topic, endpoints in topics.items()]
        for server in self._servers:
            server.start()
        self.report_state()
        self.tg.add_timer(CONF.report_interval, self.report_state,
                          initial_delay=CONF.report_interval)
        # (interval, task), or (interval, task, first delay) for a task
        # that must not wait a whole interval after a restart.
        for interval, task, *first in self.manager.periodic_tasks():
            self.tg.add_timer_args(interval, self._run_periodic,
                                   args=[task],
                                   initial_delay=first[0] if first
                                   else interval)

    def report_state(self) -> None:
        version, capabilities = self.manager.service_record()
        # The generation tells the steps this process owns from those a
        # previous process on this host left unfinished.
        capabilities = dict(capabilities,
                            **{owners.CAPABILITY: owners.GENERATION})
        try:
            self._report(volmig_context.get_admin_context(), self.binary,
                         self.host, self.topic, version, capabilities)
        except messaging.MessagingTimeout:
            # The conductor is busy or away: the next beat tries again,
            # and a trace would say nothing more.
            LOG.warning('%s on %s could not report its state within %s s',
                        self.binary, self.host, CONF.report_interval)
            return
        except Exception:
            # A missed heartbeat must not stop the next one.
            LOG.exception('%s on %s could not report its state',
                          self.binary, self.host)
            return
        if not self._ready.is_set():
            LOG.info('%s on %s is ready: consuming on %s, heartbeat '
                     'recorded', self.binary, self.host, self.topic)
            self._ready.set()

    @staticmethod
    def _run_periodic(task) -> None:
        try:
            task()
        except Exception:
            LOG.exception('Periodic task %s failed', task.__name__)

    def stop(self, graceful: bool = False) -> None:
        LOG.info('Stopping %(binary)s on %(host)s',
                 {'binary': self.binary, 'host': self.host})
        # An idle listener sees the stop only when its poll of the broker
        # times out, up to 5 s: stopped one after another, the conductor's
        # two servers took up to 10 s; together, one timeout.
        stopping = [threading.Thread(target=server.stop)
                    for server in self._servers]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        for server in self._servers:
            server.wait()
        self._servers = []
        self.manager.cleanup_host()
        super().stop(graceful)


class ServiceGroup(service.Service):
    """Several services in one process, for the embedded default."""

    def __init__(self, services: list[service.Service], on_start=None):
        super().__init__()
        self.services = services
        self._on_start = on_start

    def start(self) -> None:
        for member in self.services:
            member.start()
        if self._on_start is not None:
            self._on_start()

    def wait_ready(self, timeout: float) -> bool:
        return all(member.wait_ready(timeout) for member in self.services)

    def stop(self, graceful: bool = False) -> None:
        for member in reversed(self.services):
            member.stop(graceful)
        super().stop(graceful)

    def wait(self) -> None:
        for member in self.services:
            member.wait()


class Notified(service.Service):
    """Tells systemd when ``server`` is ready, alive and stopping."""

    def __init__(self, server, notifier: systemd_notify.Notifier):
        super().__init__()
        self.server = server
        self.notifier = notifier
        self._stopping = threading.Event()

    def start(self) -> None:
        try:
            self.server.start()
        except Exception as exc:
            # The launcher runs this in a thread of its own and would only
            # log it; the process must end, and say why in one line. What
            # started stops first, as on SIGTERM (whose handler ends the
            # process with os._exit too).
            _cannot_start(exc)
            self.server.stop()
            logging_std.shutdown()
            os._exit(1)
        self.tg.add_thread(self._announce_ready)

    def _announce_ready(self) -> None:
        while not self._stopping.is_set():
            if self.server.wait_ready(1):
                self.notifier.ready()
                if self.notifier.watchdog_interval:
                    self.tg.add_timer(self.notifier.watchdog_interval,
                                      self.notifier.watchdog)
                return

    def stop(self, graceful: bool = False) -> None:
        self._stopping.set()
        self.notifier.stopping()
        self.server.stop(graceful)
        super().stop(graceful)

    def wait(self) -> None:
        self.server.wait()


class _NoForkNotice(logging_std.Filter):
    """oslo.service warns that a service runs in the main process. volmig
    does so on purpose: systemd watches the main PID, and guests are the
    agent's children."""

    def filter(self, record):
        return 'no_fork=True' not in record.getMessage()


def _cannot_start(exc: Exception) -> str:
    """Log why this service cannot start, in one line; returns it."""
    reason = '%s cannot start: %s' % (
        os.path.basename(sys.argv[0]),
        exception.safe_message(exc) if isinstance(
            exc, exception.VolmigException) else
        '%s: %s' % (type(exc).__name__, str(exc).splitlines()[0]
                    if str(exc) else 'no reason given'))
    LOG.critical(reason)
    # The console's line, wherever the log goes.
    print(reason, file=sys.stderr, flush=True)
    return reason


def serve(build: typing.Callable[[], service.Service],
          identity: tuple = (signing.CONTROLLER,)) -> None:
    """Build the service, then run it in this process until SIGTERM (no
    forked workers). One that cannot be built or started (a port taken, a
    bad transport URL, a signing key of another kind or host than
    ``identity``, ``(kind, host)``) exits 1 with one line saying why.

    SIGUSR2 writes a Guru Meditation report (threads, configuration) to
    stderr, or to a file in ``[oslo_reports] log_dir``.
    """
    try:
        rpc.init(identity=identity)
        server = build()
    except Exception as exc:
        _cannot_start(exc)
        sys.exit(1)
    gmr.TextGuruMeditation.setup_autorun(version, conf=CONF)
    # One /metrics per process, however many services it runs.
    if CONF.metrics.port:
        metrics.serve(CONF.metrics.listen, CONF.metrics.port)
    logging_std.getLogger('oslo_service.backend._threading.service')\
        .addFilter(_NoForkNotice())
    notified = Notified(server, systemd_notify.claim())
    try:
        launcher = service.launch(CONF, notified, workers=1, no_fork=True)
        launcher.wait()
    except Exception:
        # Threads that did not stop (an RPC listener, a timer) would keep
        # the process alive until systemd's SIGKILL: it ends now, with
        # the reason logged.
        LOG.exception('%s failed while it ran or stopped',
                      os.path.basename(sys.argv[0]))
        logging_std.shutdown()
        os._exit(1)

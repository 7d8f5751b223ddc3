"""Separate volmig processes talking over the real RabbitMQ.

Each test case gets its own RabbitMQ vhost, so queues left behind by one
test cannot feed another. Test cases skip, saying why, only when no
RabbitMQ answers; .ci/run makes sure one does.
"""

import contextlib
import os
import random
import socket
import subprocess  # nosec B404
import sys

import fixtures
from oslotest import base
import testtools
from testtools import testcase

from tests import fixtures as volmig_fixtures
from tests import storage_role
from tests.integration import cluster
from volmig.conf import CONF

# Below Linux's ephemeral range (32768 and up), which every outgoing
# connection draws its port from too: a port the kernel picked from it
# was at times someone's connection by the time a service bound it.
PORTS = (20000, 32767)


# Ports handed out, one file each naming the test process that took it:
# two test workers drew the same port between one's probe and its
# service's bind (volmig-api "Address already in use").
RESERVED = os.path.join('/tmp', 'volmig-test-ports')  # nosec B108


def _reserve(port: int) -> bool:
    """Whether this process now holds ``port``, which no process handed
    out before (this one included: a test may ask for several before it
    binds any); a port of a process that has exited is taken over."""
    path = os.path.join(RESERVED, str(port))
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            try:
                with open(path) as held:
                    owner = int(held.read() or 0)
            except (FileNotFoundError, ValueError):
                continue
            if owner and os.path.exists('/proc/%d' % owner):
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            continue
        with os.fdopen(fd, 'w') as held:
            held.write(str(os.getpid()))
        return True


def free_port() -> int:
    os.makedirs(RESERVED, exist_ok=True)
    rng = random.SystemRandom()
    while True:
        port = rng.randint(*PORTS)
        if not _reserve(port):
            continue  # another test process's
        with socket.socket() as probe:
            try:
                probe.bind(('127.0.0.1', port))
            except OSError:
                continue  # taken
            return port


def rabbit_reachable() -> bool:
    try:
        socket.create_connection(cluster.RABBIT, timeout=2).close()
        return True
    except OSError:
        return False


@testtools.skipUnless(rabbit_reachable(),
                      'RabbitMQ is not reachable on %s:%d' % cluster.RABBIT)
class ProcessTestCase(storage_role.StorageRoleMixin, base.BaseTestCase):
    """A conductor, an API and ``COMPUTES`` compute agents as processes."""

    COMPUTES = 2
    # Per-host extra options, {host: {(group, name): value}}.
    COMPUTE_OPTIONS: dict = {}
    # Extra options of every process, {(group, name): value}.
    OPTIONS: dict = {}
    # Run volmig-volume too.
    VOLUME_SERVICE = False

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(volmig_fixtures.ConfFixture())
        self.state_path = self.conf_fixture.state_path
        self.vhost = vhost = self.useFixture(self.broker())
        self.conf_fixture.conf(transport_url=vhost.url)
        self.useFixture(volmig_fixtures.DatabaseFixture(
            self.database_server()))
        self.useFixture(volmig_fixtures.RPCFixture())
        extra = self.options()
        for (group, name), value in extra.items():
            self.conf_fixture.conf(group=None if group == 'DEFAULT'
                                   else group, **{name: value})
        self.hosts = ['compute-%d' % n for n in range(1, self.COMPUTES + 1)]
        api_port = self.api_port()
        self.endpoint = 'http://127.0.0.1:%d/v2.1' % api_port
        options = {
            ('api', 'listen'): '127.0.0.1',
            ('api', 'port'): api_port,
            ('api', 'auth_strategy'): 'noauth2',
            ('DEFAULT', 'report_interval'): 1,
            ('DEFAULT', 'service_down_time'): 4,
            ('DEFAULT', 'rpc_response_timeout'): 30,
            ('DEFAULT', 'debug'): True,
            ('conductor', 'heal_interval'): 1,
            ('conductor', 'migration_stall_timeout'): 3,
            ('compute', 'job_poll_interval'): 0.1}
        options.update(extra)
        self.cluster = self.useFixture(cluster.Cluster(
            self.state_path, vhost.url, CONF.database.connection,
            self.hosts, options=options,
            process_options=self.process_options(),
            prefixes=self.prefixes(), unkeyed=self.unkeyed(),
            volume=self.VOLUME_SERVICE))
        self.processes = self.cluster.processes
        # testtools gathers the cluster's details as they are now.
        self._set_up_logs = set(self.cluster.getDetails())
        self.addOnException(self._restarted_logs)
        self.setup_clients(rpc_timeout=30)
        self.cluster.wait_until_registered()

    def _restarted_logs(self, exc_info) -> None:
        """A failed test's details get the log of each process it
        restarted: the cluster's logs were gathered when it was set up,
        before those processes (and their log files) existed."""
        # Read now, as testtools reads the others: the files go with the
        # test's temporary directory.
        try:
            details = self.cluster.getDetails()
        except TypeError:
            return  # cleaned up already: its details were gathered then
        testcase.gather_details(
            {name: detail for name, detail in details.items()
             if name not in self._set_up_logs}, self.getDetails())

    def pools(self) -> str:
        """``[storage] pools``: pool-a and pool-b in the state path."""
        return ','.join('%s:%s' % (pool, os.path.join(self.state_path, pool))
                        for pool in ('pool-a', 'pool-b'))

    def api_port(self) -> int:
        """Where volmig-api listens."""
        return free_port()

    def cli(self, *args, token: str = 'admin:admin'):
        """The ``volmig`` CLI as a process against this cluster's API:
        (exit code, standard output, standard error)."""
        result = subprocess.run(  # nosec B603
            [os.path.join(sys.prefix, 'bin', 'volmig'),
             '--os-endpoint', self.endpoint, '--os-token', token, *args],
            capture_output=True, text=True, timeout=60, check=False)
        return result.returncode, result.stdout, result.stderr

    def database_server(self) -> str | None:
        """The URL of the database server the test's database is made
        on; None for the environment's (``VOLMIG_TEST_DB_URL``)."""
        return None

    def broker(self):
        """Where the services meet: a fixture with ``url`` and ``name``."""
        return cluster.VhostFixture()

    def options(self) -> dict:
        """Extra options of every process and of the test itself."""
        return dict(self.OPTIONS)

    def prefixes(self) -> dict:
        """What each process runs under: {name: command prefix}."""
        return {}

    def unkeyed(self) -> tuple:
        """The hosts given no signing key (``cluster.Cluster``)."""
        return ()

    def process_options(self) -> dict:
        """Extra options per process: {name: {(group, name): value}}, by
        compute host, or ``conductor``, ``api``, ``volume``."""
        return dict(self.COMPUTE_OPTIONS)

    def check_alive(self):
        self.cluster.check_processes()

    def crash_agent_at(self, *how: str, host: str = 'compute-1') -> None:
        """Replace ``host``'s agent by one that dies, or kills QEMU,
        libvirtd or another process, as its journal records a step:
        ``tests.integration.crash_at``'s arguments."""
        self.cluster.restart(host, command=[
            sys.executable, '-m', 'tests.integration.crash_at',
            *how]).wait_ready()

    def pid_file(self, name: str) -> str:
        """A file that names process ``name``'s pid, for
        ``crash_at --process``."""
        path = os.path.join(self.state_path, '%s.pid' % name)
        with open(path, 'w') as pid_file:
            pid_file.write(str(self.processes[name].process.pid))
        return path


class DeployedOnceTestCase(ProcessTestCase):
    """Keystone, Cinder and the like, set up once for a class by
    ``deploy`` and shared by its tests; each test still gets a volmig of
    its own, whose API listens on the class's port (``compute_url``), so
    that Keystone's catalog can name it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.volmig_port = free_port()
        cls._deployment = fixtures.Fixture()
        cls._deployment.setUp()
        try:
            cls.deploy(cls._deployment)
        except Exception:
            cls._deployment.cleanUp()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._deployment.cleanUp()
        super().tearDownClass()

    @classmethod
    def deploy(cls, deployment: fixtures.Fixture) -> None:
        """Set up the class's services as fixtures of ``deployment``."""
        raise NotImplementedError

    @classmethod
    def compute_url(cls) -> str:
        return 'http://127.0.0.1:%d/v2.1' % cls.volmig_port

    def api_port(self):
        return self.volmig_port

"""volmig services as separate processes on one RabbitMQ vhost.

Used by the integration tests and by the benchmarks.
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import fixtures
import oslo_messaging as messaging
import requests
from testtools import content

from tests import fixtures as volmig_fixtures
from tests import openstack
from volmig import config
from volmig import context as volmig_context
from volmig import rpc
from volmig import signing
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.db import api as db_api
from volmig.db import schema
from volmig.signing import keys

RABBIT = ('127.0.0.1', 5672)
MANAGEMENT_API = 'http://127.0.0.1:15672/api'
BIN_DIR = os.path.dirname(sys.executable)


class VhostFixture(fixtures.Fixture):
    """A RabbitMQ vhost of its own, so no queue is shared with others.

    Made and dropped over the management API: a request each, where
    rabbitmqctl starts an Erlang VM (half a second of CPU, three times
    per test).
    """

    def _setUp(self):
        self.name = 'volmig-test-%s' % uuid.uuid4().hex[:10]
        self._manage('PUT', 'vhosts/%s' % self.name)
        self.addCleanup(self._manage, 'DELETE', 'vhosts/%s' % self.name)
        self._manage('PUT', 'permissions/%s/guest' % self.name,
                     {'configure': '.*', 'write': '.*', 'read': '.*'})
        self.url = 'rabbit://guest:guest@%s:%d/%s' % (RABBIT + (self.name,))

    def queues(self) -> set[str]:
        """The vhost's queues, asked of the broker itself."""
        return set(self._ctl('list_queues', '-p', self.name,
                             '--no-table-headers', 'name').split())

    def consumed_queues(self) -> set[str]:
        """The vhost's queues that some listener consumes from now.

        Asked of the broker itself: the management API's figures lag by
        up to its statistics interval (5 s).
        """
        listing = self._ctl('list_queues', '-p', self.name,
                            '--no-table-headers', 'name', 'consumers')
        return {name for name, _, consumers in (
            line.strip().partition('\t') for line in listing.splitlines())
            if consumers.strip() not in ('', '0')}

    @staticmethod
    def _manage(method: str, path: str, body: dict | None = None) -> None:
        try:
            answer = requests.request(
                method, '%s/%s' % (MANAGEMENT_API, path), json=body,
                auth=('guest', 'guest'), timeout=60)
        except requests.ConnectionError:
            raise RuntimeError(
                "RabbitMQ's management API does not answer on %s: enable "
                'rabbitmq_management (tools/bootstrap.sh does)'
                % MANAGEMENT_API) from None
        answer.raise_for_status()

    def close_connections(self) -> int:
        """Close every client connection to this vhost, as a network
        fault or a broker failover would; returns how many."""
        listing = self._ctl('list_connections', '--no-table-headers',
                            'pid', 'vhost')
        count = 0
        for line in listing.splitlines():
            pid, _, vhost = line.strip().partition('\t')
            if vhost == self.name:
                self._ctl('close_connection', pid, 'closed by a volmig test')
                count += 1
        return count

    @staticmethod
    def _ctl(*args) -> str:
        return subprocess.run(['rabbitmqctl', '-q', *args], check=True,
                              capture_output=True, timeout=60,
                              text=True).stdout


class ServiceProcess(fixtures.Fixture):
    """One volmig binary in its own process, logging to a file."""

    def __init__(self, binary, config_files, log_dir, name, command=None,
                 env=None, prefix=()):
        super().__init__()
        self.binary = binary
        # Variables added to this process's environment.
        self.env = env or {}
        # What it runs under, e.g. ``ip netns exec HOST``.
        self.prefix = list(prefix)
        self.config_files = config_files
        self.log_path = os.path.join(log_dir, name + '.log')
        # What runs instead of the binary, e.g. a test's wrapper of it.
        self.command = command or [os.path.join(BIN_DIR, binary)]
        # A process the test kills on purpose has not failed.
        self.may_die = False
        self.process = None

    def _setUp(self):
        args = self.prefix + list(self.command)
        for path in self.config_files:
            args += ['--config-file', path]
        args += ['--log-file', self.log_path]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT,
                                        env=dict(os.environ, **self.env))
        self.addCleanup(self.stop)
        self.addDetail(os.path.basename(self.log_path), content.Content(
            content.UTF8_TEXT, self._log_bytes))

    def _log_bytes(self) -> list[bytes]:
        """The log, read when the test's result is recorded. A process
        that failed the test before it logged anything left no file:
        ``content_from_file`` would raise there, in the test runner, and
        end its worker with the tests it had left."""
        try:
            with open(self.log_path, 'rb') as log:
                return [log.read()]
        except FileNotFoundError:
            return [b'(no log: the process wrote none)']

    def wait_ready(self, timeout: float = 120) -> None:
        """Until the process logs that it is ready (it consumes its RPC
        topic). A killed agent's last heartbeat shows it up for a while
        after, so the service list cannot tell that its successor is."""
        openstack.wait_for(self.log_path, self.ready, timeout, self.process)

    def ready(self) -> bool:
        """Whether the process logged that it is ready (the previous
        release's services log no such line)."""
        try:
            with open(self.log_path) as log:
                return 'is ready: consuming on' in log.read()
        except FileNotFoundError:
            return False

    @property
    def failed(self) -> bool:
        return not self.may_die and self.process.poll() not in (
            None, 0, -signal.SIGTERM)

    def stop(self, sig=signal.SIGTERM):
        self.signal(sig)
        self.wait()

    def signal(self, sig=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self):
        """Until it has exited, killed after 30 s."""
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def write_config(path: str, options: dict) -> str:
    """Write ``{(group, name): value}`` as an ini file."""
    sections: dict = {}
    for (group, key), value in options.items():
        sections.setdefault(group, []).append('%s = %s' % (key, value))
    with open(path, 'w') as config_file:
        for group, lines in sections.items():
            config_file.write('[%s]\n%s\n' % (group, '\n'.join(lines)))
    return path


class Cluster(fixtures.Fixture):
    """A conductor, an API and compute agents, each its own process.

    ``options`` go to every process; ``process_options`` maps a process
    name (a compute host, ``conductor``, ``api`` or ``volume``) to its
    extra options. With ``volume``, volmig-volume runs too.

    The conductor and the API hold the master key (``[signing] key_file``
    of the options, else the test's, else a new one); each compute host
    and volmig-volume get their own key, exported from it and recorded in
    the test's database, as deployed; but those named in ``unkeyed`` (a
    previous release's hosts, which sign nothing) until ``give_key``.
    """

    def __init__(self, state_path: str, transport_url: str, db_url: str,
                 hosts: list[str], options: dict | None = None,
                 process_options: dict | None = None, volume: bool = False,
                 prefixes: dict | None = None, unkeyed=()):
        super().__init__()
        self.unkeyed = set(unkeyed)
        self.state_path = state_path
        self.hosts = hosts
        self.volume = volume
        self.options = {
            ('DEFAULT', 'transport_url'): transport_url,
            ('DEFAULT', 'state_path'): state_path,
            ('database', 'connection'): db_url,
            ('compute', 'driver'): 'fake',
        }
        self.options.update(options or {})
        if ('signing', 'key_file') not in self.options:
            self.options[('signing', 'key_file')] = (
                CONF.signing.key_file or self._new_master())
        self.process_options = process_options or {}
        # {name: command prefix}, e.g. to run a host in a namespace.
        self.prefixes = prefixes or {}
        self.processes: dict[str, ServiceProcess] = {}
        self._restarts = 0

    def _setUp(self):
        self.config_file = write_config(
            os.path.join(self.state_path, 'volmig.conf'), self.options)
        services = [('volmig-conductor', 'conductor', {}),
                    ('volmig-api', 'api', {})]
        if self.volume:
            services.append(('volmig-volume', 'volume', {}))
        services += [('volmig-compute', host, {('DEFAULT', 'host'): host})
                     for host in self.hosts]
        for binary, name, options in services:
            if binary in signing.HOSTS:
                options[('signing', 'key_file')] = self.key_path(
                    *self._key_holder(binary, name))
                if name not in self.unkeyed:
                    self.give_key(name, binary)
            options.update(self.process_options.get(name, {}))
            self.spawn(binary, name, write_config(
                os.path.join(self.state_path, name + '.conf'), options)
                if options else None)

    def _new_master(self) -> str:
        return master_key(self.state_path, this_process=False)

    @staticmethod
    def _key_holder(binary: str, name: str) -> tuple[str, str]:
        # A compute agent's host is its process's name; volmig-volume runs
        # on this machine's.
        return binary, name if binary == signing.COMPUTE else \
            socket.gethostname()

    def key_path(self, service: str, host: str) -> str:
        return os.path.join(self.state_path, 'key-%s-%s.json'
                            % (service, host))

    def export_key(self, service: str, host: str) -> str:
        """``service``'s own key on ``host``, as "volmig-manage key export"
        records and writes it."""
        return volmig_fixtures.export_key(
            self.options[('signing', 'key_file')], service, host,
            self.key_path(service, host))

    def give_key(self, name: str, binary: str = 'volmig-compute') -> str:
        """Process ``name``'s own key, exported (as an operator does for a
        host that an upgrade makes sign)."""
        self.unkeyed.discard(name)
        return self.export_key(*self._key_holder(binary, name))

    def restart(self, name: str, sig=signal.SIGTERM,
                command=None, prefix=None,
                options: dict | None = None) -> ServiceProcess:
        """Stop a process with ``sig`` and start its binary again.

        ``command`` runs instead of the binary, with the same options;
        ``prefix`` replaces what it ran under (an upgrade, say);
        ``options`` are set over the ones it had.
        """
        old = self.processes[name]
        old.may_die = True
        old.stop(sig)
        self._restarts += 1
        config_files = list(old.config_files)
        if options:
            config_files.append(write_config(os.path.join(
                self.state_path, '%s-%d.conf' % (name, self._restarts)),
                options))
        return self._run(name, ServiceProcess(
            old.binary, config_files, self.state_path,
            '%s-%d' % (name, self._restarts), command,
            prefix=old.prefix if prefix is None else prefix))

    def wait_for_death(self, name: str, timeout: float = 120) -> None:
        """Until a process the test expects to die has died."""
        process = self.processes[name]
        process.may_die = True
        deadline = time.monotonic() + timeout
        while process.process.poll() is None:
            if time.monotonic() > deadline:
                raise RuntimeError('%s did not die' % name)
            time.sleep(0.05)

    def spawn(self, binary, name, extra_config=None, env=None):
        files = [self.config_file] + ([extra_config] if extra_config else [])
        return self._run(name, ServiceProcess(
            binary, files, self.state_path, name, env=env,
            prefix=self.prefixes.get(name, ())))

    def _run(self, name: str, process: ServiceProcess) -> ServiceProcess:
        self.processes[name] = self.useFixture(process)
        # Registered after each process, so that it runs before any
        # process's own stop.
        self.addCleanup(self.stop_all)
        return process

    def stop_all(self) -> None:
        """Every process stopped once the test is over: an agent that runs
        guests gracefully (it stops them), the conductor after those (they
        report to it while they stop), the rest killed at once.

        A graceful stop waits for each idle listener's poll of the broker
        to time out (up to 5 s): two waves of it were 4 s of every test
        (measured: 3.8 s of a 9.1 s test). Stopping on SIGTERM is tested
        where it is the point: restarts, systemd's stop, guests stopped
        with their agent.
        """
        graceful = [process for name, process in self.processes.items()
                    if self._runs_guests(name)]
        rest = [process for name, process in self.processes.items()
                if name != 'conductor' and process not in graceful]
        for process in rest:
            process.signal(signal.SIGKILL)
        for process in graceful:
            process.signal()
        for process in graceful + rest:
            process.wait()
        conductor = self.processes.get('conductor')
        if conductor is not None:
            conductor.stop(signal.SIGKILL)

    def _runs_guests(self, name: str) -> bool:
        """Whether process ``name`` is an agent whose driver starts real
        guests (QEMU, libvirt), which must not outlive it."""
        if self.processes[name].binary != 'volmig-compute':
            return False
        driver = self.process_options.get(name, {}).get(
            ('compute', 'driver'), self.options[('compute', 'driver')])
        return driver != 'fake'

    def check_processes(self) -> None:
        for name, process in self.processes.items():
            if process.failed:
                raise RuntimeError('%s exited with %s' % (
                    name, process.process.returncode))

    def wait_until_registered(self, timeout: float = 60) -> None:
        """Until the API and every compute agent report themselves up."""
        admin = volmig_context.get_admin_context()
        wanted = {('volmig-api', None)} | {('volmig-compute', host)
                                           for host in self.hosts}
        if self.volume:
            wanted.add(('volmig-volume', None))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_processes()
            # A call sent before the conductor consumes is lost, and waits
            # out its whole timeout: 2 s of every test's set-up went so.
            # Until the conductor's log says it consumes, a call waits
            # briefly (the previous release's never says so).
            conductor = conductor_rpcapi.ConductorAPI(
                timeout=2 if self.processes['conductor'].ready() else 0.5)
            try:
                services = conductor.service_get_all(admin, None)
            except messaging.MessagingTimeout:
                continue
            up = {(s['binary'], s['host']) for s in services if s['is_up']}
            up |= {(binary, None) for binary, _ in up}
            if wanted <= up:
                return
            time.sleep(0.2)
        raise RuntimeError('services did not register within %ss' % timeout)


def master_key(directory: str, this_process: bool = True) -> str:
    """A new master key file in ``directory``; this process's own
    (``[signing] key_file``) too, unless not ``this_process``."""
    path = os.path.join(directory, 'key.json')
    keys.create(path)
    if this_process:
        CONF.set_override('key_file', path, group='signing')
    return path


@contextlib.contextmanager
def qemu_cluster(options: dict):
    """For a script: the qemu driver on compute-1 with volmig-volume and
    pools pool-a and pool-b, on a vhost and a temporary directory of its
    own, with this process as their client. Yields (cluster, pools).

    The database is on a tmpfs (``/dev/shm``): a deployment's is on its
    controllers, not on the disk whose copies a script measures, where
    its commits would be flushes that a paced copy takes for a guest's."""
    with fixtures.TempDir() as tmp, VhostFixture() as vhost, \
            fixtures.TempDir(rootdir='/dev/shm') as database:  # nosec B108
        db_url = 'sqlite:///%s/volmig.sqlite' % database.path
        pools = {pool: os.path.join(tmp.path, pool)
                 for pool in ('pool-a', 'pool-b')}
        config.parse_args([], default_config_files=[], setup_logging=False)
        CONF.set_override('transport_url', vhost.url)
        CONF.set_override('state_path', tmp.path)
        CONF.set_override('backend', 'file', group='volume')
        db_api.configure(db_url)
        schema.upgrade()
        master_key(tmp.path)
        rpc.init()
        everything = {('compute', 'driver'): 'qemu',
                      ('compute', 'stop_guests_on_exit'): True,
                      ('qemu', 'export_disks'): True,
                      ('compute', 'shutdown_timeout'): 1,
                      ('volume', 'backend'): 'file',
                      ('storage', 'pools'): ','.join(
                          '%s:%s' % item for item in pools.items())}
        everything.update(options)
        try:
            with Cluster(tmp.path, vhost.url, db_url, ['compute-1'],
                         volume=True, options=everything) as services:
                services.wait_until_registered()
                yield services, pools
        finally:
            rpc.cleanup()

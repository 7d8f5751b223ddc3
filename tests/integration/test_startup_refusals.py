"""A service that cannot start (a configuration that would lose data, a
port taken, a bad transport URL) exits 1 at once with one line saying
why, and no traceback; one that fails while it stops exits 1 too."""

import os
import signal
import socket
import subprocess
import sys

import fixtures
from oslotest import base

from tests import openstack
from tests.integration import cluster
from volmig import signing
from volmig.signing import keys


class StartupRefusalTest(base.BaseTestCase):

    def _config(self, options: dict) -> str:
        state = self.useFixture(fixtures.TempDir()).path
        options = {
            ('DEFAULT', 'state_path'): state,
            ('DEFAULT', 'transport_url'): 'fake://',
            ('database', 'connection'): 'sqlite:///%s/db.sqlite' % state,
            ('signing', 'key_file'): cluster.master_key(state,
                                                        this_process=False),
            **options}
        return cluster.write_config(os.path.join(state, 'volmig.conf'),
                                    options)

    def _start(self, options: dict, binary='volmig-compute',
               args=()) -> subprocess.CompletedProcess:
        if binary == 'volmig-compute' and ('signing', 'key_file') not in \
                options:
            options = {**options, ('signing', 'key_file'):
                       self.host_key('refusing')}
            options.setdefault(('DEFAULT', 'host'), 'refusing')
        config = self._config(options)
        return subprocess.run(
            [os.path.join(cluster.BIN_DIR, binary), '--config-file', config,
             *args], capture_output=True, text=True, timeout=60)

    def host_key(self, host: str, service=signing.COMPUTE) -> str:
        """A host's own key, as an export writes it (no controller reads
        it here: nothing records it)."""
        state = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(state, 'host-key.json')
        keys.export(cluster.master_key(state, this_process=False),
                    keys.Holder(service, host, 'g1'), path)
        return path

    def taken_port(self) -> int:
        """A port something else listens on."""
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(('127.0.0.1', 0))
        listener.listen()
        return listener.getsockname()[1]

    def assert_cannot_start(self, result, binary, reason):
        self.assertEqual(1, result.returncode, result.stderr)
        [line] = [line for line in result.stderr.splitlines()
                  if 'cannot start' in line]
        self.assertIn('%s cannot start: %s' % (binary, reason), line)
        self.assertNotIn('Traceback', result.stderr)

    def test_api_port_taken(self):
        port = self.taken_port()
        result = self._start({('api', 'listen'): '127.0.0.1',
                              ('api', 'port'): port}, 'volmig-api')
        self.assert_cannot_start(result, 'volmig-api', 'OSError')
        self.assertIn('127.0.0.1', result.stderr)

    def test_all_in_one_port_taken(self):
        port = self.taken_port()
        state = self.useFixture(fixtures.TempDir()).path
        result = self._start({}, 'volmig-all-in-one', (
            '--state-dir', state, '--driver', 'fake', '--api-port',
            str(port)))
        self.assert_cannot_start(result, 'volmig-all-in-one', 'OSError')

    def test_bad_transport_url(self):
        result = self._start({('DEFAULT', 'transport_url'): 'nonsense://'},
                             'volmig-conductor')
        self.assert_cannot_start(
            result, 'volmig-conductor', 'DriverLoadFailure: Failed to load '
            'transport driver "nonsense"')

    def test_no_signing_key(self):
        result = self._start({('signing', 'key_file'): '/nonexistent/k'},
                             'volmig-conductor')
        self.assert_cannot_start(
            result, 'volmig-conductor', 'Invalid configuration: cannot read '
            'the RPC signing key /nonexistent/k (No such file or directory)'
            ': create it with "volmig-manage key create"')

    def test_a_key_of_another_kind_or_host(self):
        """A host given the master key, or another host's, and a
        controller given a host's: each says so in one line."""
        master = cluster.master_key(self.useFixture(fixtures.TempDir()).path,
                                    this_process=False)
        for binary, key, says in (
                ('volmig-compute', master, 'volmig-compute on refusing needs '
                 'its own key ("volmig-manage key export --service '
                 'volmig-compute --host refusing"), and %s holds the master '
                 'key' % master),
                ('volmig-compute', self.host_key('compute-2'),
                 'holds the key of volmig-compute on "compute-2"'),
                ('volmig-volume', self.host_key('refusing'),
                 'volmig-volume on refusing needs its own key'),
                ('volmig-conductor', self.host_key('refusing'),
                 'a controller needs the master key, and')):
            result = self._start({('DEFAULT', 'host'): 'refusing',
                                  ('compute', 'driver'): 'fake',
                                  ('signing', 'key_file'): key}, binary)
            self.assert_cannot_start(result, binary, 'Invalid configuration')
            self.assertIn(says, result.stderr)

    def test_no_driver_set(self):
        result = self._start({('DEFAULT', 'host'): 'refusing'})
        self.assertEqual(1, result.returncode)
        self.assert_cannot_start(result, 'volmig-compute',
                                 '[compute] driver is not set. Set it to '
                                 '"qemu"')
        self.assertNotIn('Traceback', result.stderr)

    def test_unknown_driver(self):
        result = self._start({('compute', 'driver'): 'vmware'})
        self.assertEqual(1, result.returncode)
        self.assertIn('[compute] driver "vmware" is not one of: fake, '
                      'libvirt, qemu', result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_a_failure_while_stopping_ends_the_process(self):
        # The threads that did not stop kept such a process alive until
        # it was SIGKILLed.
        config = self._config({})
        subprocess.run([os.path.join(cluster.BIN_DIR, 'volmig-manage'),
                        '--config-file', config, 'db', 'sync'],
                       check=True, capture_output=True, timeout=60)
        log = os.path.join(os.path.dirname(config), 'conductor.log')
        process = subprocess.Popen(
            [sys.executable, '-m', 'tests.failing_stop', 'volmig-conductor',
             '--config-file', config, '--log-file', log],
            cwd=os.path.join(os.path.dirname(__file__), '..', '..'),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: process.poll() is None and process.kill())

        def logged(text):
            with open(log) as lines:
                return text in lines.read()

        openstack.wait_for('the conductor', lambda: os.path.exists(log)
                           and logged('is ready'), process=process)
        process.send_signal(signal.SIGTERM)
        self.assertEqual(1, process.wait(timeout=30))
        self.assertTrue(logged('volmig-conductor failed while it ran or '
                               'stopped'))
        self.assertTrue(logged('injected failure while stopping'))

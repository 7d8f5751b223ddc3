"""Separate volmig processes talking over the real RabbitMQ.

Each test case gets its own RabbitMQ vhost, so queues left behind by one
test cannot feed another. Test cases skip, saying why, only when no
RabbitMQ answers; .ci/run makes sure one does.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import fixtures
import oslo_messaging as messaging
from oslotest import base
import testtools
from testtools import content

from volmig import client
from volmig import context as volmig_context
from volmig import states
from volmig import volume
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.tests import fixtures as volmig_fixtures

RABBIT = ('127.0.0.1', 5672)
BIN_DIR = os.path.dirname(sys.executable)


def rabbit_reachable() -> bool:
    try:
        socket.create_connection(RABBIT, timeout=2).close()
        return True
    except OSError:
        return False


class VhostFixture(fixtures.Fixture):

    def _setUp(self):
        self.name = 'volmig-test-%s' % uuid.uuid4().hex[:10]
        self._ctl('add_vhost', self.name)
        self.addCleanup(self._ctl, 'delete_vhost', self.name)
        self._ctl('set_permissions', '-p', self.name, 'guest', '.*', '.*',
                  '.*')
        self.url = 'rabbit://guest:guest@%s:%d/%s' % (RABBIT + (self.name,))

    @staticmethod
    def _ctl(*args):
        subprocess.run(['rabbitmqctl', '-q', *args], check=True,
                       capture_output=True, timeout=60)


class ServiceProcess(fixtures.Fixture):
    """One volmig binary in its own process, logging to a file."""

    def __init__(self, binary, config_files, log_dir, name):
        super().__init__()
        self.binary = binary
        self.config_files = config_files
        self.log_path = os.path.join(log_dir, name + '.log')
        self.process = None

    def _setUp(self):
        args = [os.path.join(BIN_DIR, self.binary)]
        for path in self.config_files:
            args += ['--config-file', path]
        args += ['--log-file', self.log_path]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)
        self.addDetail(os.path.basename(self.log_path),
                       content.content_from_file(
                           self.log_path, buffer_now=False))

    def stop(self, sig=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@testtools.skipUnless(rabbit_reachable(),
                      'RabbitMQ is not reachable on %s:%d' % RABBIT)
class ProcessTestCase(base.BaseTestCase):
    """A conductor, an API and ``COMPUTES`` compute agents as processes."""

    COMPUTES = 2
    # Per-host extra options, {host: {(group, name): value}}.
    COMPUTE_OPTIONS: dict = {}

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(volmig_fixtures.ConfFixture())
        self.state_path = self.conf_fixture.state_path
        vhost = self.useFixture(VhostFixture())
        self.conf_fixture.conf(transport_url=vhost.url)
        self.conf_fixture.conf(heal_interval=1, group='conductor')
        self.useFixture(volmig_fixtures.DatabaseFixture())
        self.config_file = self._write_config(
            'volmig.conf', self._common_options(vhost.url))
        self.useFixture(volmig_fixtures.RPCFixture())
        self.processes = {}
        self.hosts = ['compute-%d' % n for n in range(1, self.COMPUTES + 1)]
        self.spawn('volmig-conductor', 'conductor')
        self.spawn('volmig-api', 'api')
        for host in self.hosts:
            self.spawn_compute(host)
        self.admin = volmig_context.get_admin_context()
        self.ctxt = volmig_context.get_service_context()
        self.user = volmig_context.RequestContext(
            user_id='alice', project_id='project-a', roles=['member'])
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.client = client.MigrationClient(timeout=30)
        self.volumes = volume.get_adapter()
        self.wait_for_services(self.hosts)

    def _common_options(self, url):
        return {
            ('DEFAULT', 'transport_url'): url,
            ('DEFAULT', 'state_path'): self.state_path,
            ('DEFAULT', 'report_interval'): 1,
            ('DEFAULT', 'service_down_time'): 4,
            ('DEFAULT', 'rpc_call_timeout'): 30,
            ('DEFAULT', 'debug'): True,
            ('database', 'connection'): CONF.database.connection,
            ('conductor', 'heal_interval'): 1,
            ('compute', 'job_poll_interval'): 0.1,
        }

    def _write_config(self, name, options):
        sections: dict = {}
        for (group, key), value in options.items():
            sections.setdefault(group, []).append('%s = %s' % (key, value))
        path = os.path.join(self.state_path, name)
        with open(path, 'w') as config_file:
            for group, lines in sections.items():
                config_file.write('[%s]\n%s\n' % (group, '\n'.join(lines)))
        return path

    def spawn(self, binary, name, extra_config=None):
        files = [self.config_file] + ([extra_config] if extra_config else [])
        process = self.useFixture(ServiceProcess(binary, files,
                                                 self.state_path, name))
        self.processes[name] = process
        return process

    def spawn_compute(self, host):
        options = {('DEFAULT', 'host'): host}
        options.update(self.COMPUTE_OPTIONS.get(host, {}))
        return self.spawn('volmig-compute', host,
                          self._write_config(host + '.conf', options))

    def wait_until(self, predicate, timeout=60, what='condition'):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            for name, process in self.processes.items():
                if process.process.poll() not in (None, 0, -15):
                    self.fail('%s exited with %s' % (
                        name, process.process.returncode))
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(0.2)

    def wait_for_services(self, compute_hosts):
        """Until the API and the compute agents are registered and up."""
        # A call sent before the conductor listens is lost; poll briefly.
        conductor = conductor_rpcapi.ConductorAPI(timeout=2)

        def registered():
            try:
                services = conductor.service_get_all(self.admin, None)
            except messaging.MessagingTimeout:
                return False
            up = {(s['binary'], s['host']) for s in services if s['is_up']}
            return {s[0] for s in up} >= {'volmig-api', 'volmig-compute'} \
                and set(compute_hosts) <= {s[1] for s in up}
        self.wait_until(registered, what='volmig-api and compute agents %s'
                        % compute_hosts)

    def create_server(self, host):
        vol = self.volumes.create_volume(self.admin, 16)
        [server] = self.conductor.build_instances(
            self.user, 'vm', [{'volume_id': vol['id'], 'boot_index': 0}], 1,
            host)

        def active():
            found = self.conductor.instance_get(self.admin, server['uuid'])
            return found if found['vm_state'] == states.VM_ACTIVE else None
        server = self.wait_until(active, what='server to be active')
        return server, server['block_devices'][0]

    def dst_attachment(self, server, bdm):
        dst = self.volumes.create_volume(self.admin, 16)
        return self.volumes.attachment_create(self.admin, dst['id'],
                                              server['uuid'],
                                              bdm['attach_mode'])

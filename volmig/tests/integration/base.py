"""Separate volmig processes talking over the real RabbitMQ.

Each test case gets its own RabbitMQ vhost, so queues left behind by one
test cannot feed another. Test cases skip, saying why, only when no
RabbitMQ answers; .ci/run makes sure one does.
"""

import socket
import time

from oslotest import base
import testtools

from volmig import client
from volmig import context as volmig_context
from volmig import states
from volmig import volume
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.tests import fixtures as volmig_fixtures
from volmig.tests.integration import cluster


def rabbit_reachable() -> bool:
    try:
        socket.create_connection(cluster.RABBIT, timeout=2).close()
        return True
    except OSError:
        return False


@testtools.skipUnless(rabbit_reachable(),
                      'RabbitMQ is not reachable on %s:%d' % cluster.RABBIT)
class ProcessTestCase(base.BaseTestCase):
    """A conductor, an API and ``COMPUTES`` compute agents as processes."""

    COMPUTES = 2
    # Per-host extra options, {host: {(group, name): value}}.
    COMPUTE_OPTIONS: dict = {}

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(volmig_fixtures.ConfFixture())
        self.state_path = self.conf_fixture.state_path
        vhost = self.useFixture(cluster.VhostFixture())
        self.conf_fixture.conf(transport_url=vhost.url)
        self.useFixture(volmig_fixtures.DatabaseFixture())
        self.useFixture(volmig_fixtures.RPCFixture())
        self.hosts = ['compute-%d' % n for n in range(1, self.COMPUTES + 1)]
        self.cluster = self.useFixture(cluster.Cluster(
            self.state_path, vhost.url, CONF.database.connection,
            self.hosts, options={
                ('DEFAULT', 'report_interval'): 1,
                ('DEFAULT', 'service_down_time'): 4,
                ('DEFAULT', 'rpc_call_timeout'): 30,
                ('DEFAULT', 'debug'): True,
                ('conductor', 'heal_interval'): 1,
                ('compute', 'job_poll_interval'): 0.1},
            compute_options=self.COMPUTE_OPTIONS))
        self.processes = self.cluster.processes
        self.admin = volmig_context.get_admin_context()
        self.ctxt = volmig_context.get_service_context()
        self.user = volmig_context.RequestContext(
            user_id='alice', project_id='project-a', roles=['member'])
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.client = client.MigrationClient(timeout=30)
        self.volumes = volume.get_adapter()
        self.cluster.wait_until_registered()

    def wait_until(self, predicate, timeout=60, what='condition'):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            self.cluster.check_processes()
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(0.2)

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

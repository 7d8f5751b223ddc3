"""Real services, in this process, on the fake:// transport."""

import time

from oslotest import base

from volmig import client
from volmig import context as volmig_context
from volmig import service
from volmig import states
from volmig import volume
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.tests import fixtures


class ServicesTestCase(base.BaseTestCase):
    """Runs a conductor, an API and ``COMPUTES`` compute agents."""

    COMPUTES = 1

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(fixtures.ConfFixture())
        self.configure()
        self.useFixture(fixtures.DatabaseFixture())
        self.useFixture(fixtures.RPCFixture())
        self.useFixture(fixtures.PolicyFixture())
        self.services = {}
        for binary, host in self.service_list():
            self.start_service(binary, host)
        self.ctxt = volmig_context.get_service_context()
        self.admin = volmig_context.get_admin_context()
        self.user = volmig_context.RequestContext(
            user_id='alice', project_id='project-a', roles=['member'])
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.client = client.MigrationClient(timeout=20)
        self.volumes = volume.get_adapter()

    def configure(self):
        """Hook for a test case's own options."""

    def service_list(self):
        hosts = ['compute-%d' % n for n in range(1, self.COMPUTES + 1)]
        return ([(service.CONDUCTOR, 'conductor-host'),
                 (service.API, 'api-host')]
                + [(service.COMPUTE, host) for host in hosts])

    def start_service(self, binary, host):
        server = service.Service(binary, host=host)
        server.start()
        self.addCleanup(server.stop)
        self.services[host] = server
        return server

    def wait_until(self, predicate, timeout=20, what='condition'):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(0.05)

    def create_server(self, multiattach=False, host=None, attach_mode='rw'):
        """A server booted from a new volume; returns (server, bdm)."""
        vol = self.volumes.create_volume(self.admin, 16,
                                         multiattach=multiattach)
        [server] = self.conductor.build_instances(
            self.user, 'vm', [{'volume_id': vol['id'], 'boot_index': 0,
                               'attach_mode': attach_mode}], 1, host)
        server = self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        return server, server['block_devices'][0]

    def wait_for_server(self, uuid, vm_state, task_state=None):
        def ready():
            server = self.conductor.instance_get(self.admin, uuid)
            if (server['vm_state'] == vm_state
                    and server['task_state'] == task_state):
                return server
            return None
        return self.wait_until(ready, what='server %s to be %s' %
                               (uuid, vm_state))

    def dst_attachment(self, server, bdm):
        """What the block-storage service does before complete."""
        dst = self.volumes.create_volume(self.admin, 16)
        return self.volumes.attachment_create(self.admin, dst['id'],
                                              server['uuid'],
                                              bdm['attach_mode'])

    def fake_disk(self, server, bdm):
        driver = self.services[server['host']].manager.driver
        return driver.guest_disk(server['uuid'], bdm['volume_id'])

"""What a test does as the block-storage service and as a user.

Shared by the functional and integration bases; a base provides
``check_alive()`` to fail fast when a service it runs has died.
"""

import time

from volmig import block_storage
from volmig import client
from volmig import context as volmig_context
from volmig import states
from volmig.conductor import operator_rpcapi


class StorageRoleMixin:

    def setup_clients(self, rpc_timeout: int) -> None:
        self.ctxt = volmig_context.get_service_context()
        self.admin = volmig_context.get_admin_context()
        self.user = volmig_context.RequestContext(
            user_id='alice', project_id='project-a', roles=['member'])
        self.conductor = operator_rpcapi.OperatorAPI()
        self.client = client.MigrationClient(timeout=rpc_timeout)
        self.volumes = block_storage.get_adapter()

    def check_alive(self) -> None:
        """Raise if a service under test has died."""

    def wait_until(self, predicate, timeout=60, what='condition'):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            self.check_alive()
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(0.05)

    def create_server(self, host=None, multiattach=False, attach_mode='rw'):
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
        """What the block-storage service makes before complete."""
        dst = self.volumes.create_volume(self.admin, 16)
        return self.volumes.attachment_create(self.admin, dst['id'],
                                              server['uuid'],
                                              bdm['attach_mode'])

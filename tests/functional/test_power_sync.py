"""The agent's power-state sync, through the real services on fake://."""

from tests.functional import base
from volmig import states


class PowerSyncTest(base.ServicesTestCase):
    COMPUTES = 2

    def configure(self):
        # The test runs each sync itself.
        self.conf_fixture.conf(sync_power_state_interval=3600,
                                 group='compute')

    def test_a_guest_that_went_down_is_recorded_as_stopped(self):
        here, _ = self.create_server(host='compute-1')
        there, _ = self.create_server(host='compute-2')
        self.assertEqual([here['uuid']], [
            i['uuid'] for i in self.conductor.instance_list(
                self.admin, host='compute-1')])
        for server in (here, there):
            # The guest powers off by itself, as an OS shutting down.
            driver = self.services[server['host']].manager.driver
            driver.power_off(server)
        self.services['compute-1'].manager.sync_power_states()
        self.assertEqual(states.VM_STOPPED, self.conductor.instance_get(
            self.admin, here['uuid'])['vm_state'])
        # Each agent syncs its own guests only.
        self.assertEqual(states.VM_ACTIVE, self.conductor.instance_get(
            self.admin, there['uuid'])['vm_state'])

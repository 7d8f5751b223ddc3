"""Every refusal of the migration flow, and that it leaves no trace."""

from oslo_utils import uuidutils

from tests.functional import base
from volmig import context as volmig_context
from volmig import exception
from volmig import states


class MigrationRefusalTest(base.ServicesTestCase):

    def _state(self, server):
        """What a refusal must not change."""
        server = self.conductor.instance_get(self.admin, server['uuid'])
        return (server['task_state'], server['block_devices'],
                self.client.list(self.ctxt, instance_uuid=server['uuid']))

    def test_complete_before_start(self):
        server, bdm = self.create_server()
        before = self._state(server)
        dst = self.dst_attachment(server, bdm)
        exc = self.assertRaises(exception.InvalidMigrationState,
                                self.client.complete, self.ctxt,
                                bdm['attachment_id'], dst['id'])
        self.assertIn('not started', str(exc))
        self.assertEqual(before, self._state(server))

    def test_cancel_after_complete(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        dst = self.dst_attachment(server, bdm)
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        exc = self.assertRaises(exception.InvalidMigrationState,
                                self.client.cancel, self.ctxt,
                                bdm['attachment_id'])
        self.assertIn('cancel', str(exc))
        self.assertIn(states.COMPLETED, str(exc))
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual(dst['id'],
                         server['block_devices'][0]['attachment_id'])

    def test_start_on_unknown_attachment(self):
        unknown = uuidutils.generate_uuid()
        exc = self.assertRaises(exception.AttachmentNotFound,
                                self.client.start, self.ctxt, unknown)
        self.assertIn(unknown, str(exc))
        self.assertEqual([], self.client.list(self.ctxt))

    def test_stop_start_delete_refused_while_migrating(self):
        server, bdm = self.create_server()
        self.client.start(self.ctxt, bdm['attachment_id'])
        for action in (self.conductor.stop_instance,
                       self.conductor.start_instance,
                       self.conductor.delete_instance):
            exc = self.assertRaises(exception.InstanceInvalidState, action,
                                    self.user, server['uuid'])
            self.assertIn(states.TASK_VOLUME_MIGRATING, str(exc))
        exc = self.assertRaises(exception.InstanceInvalidState,
                                self.conductor.detach_volume, self.user,
                                server['uuid'], bdm['volume_id'])
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual(states.VM_ACTIVE, server['vm_state'])
        self.assertEqual(states.TASK_VOLUME_MIGRATING, server['task_state'])
        self.assertEqual(1, len(server['block_devices']))

    def test_start_refused_while_the_server_has_another_migration(self):
        server, bdm = self.create_server()
        vol = self.volumes.create_volume(self.admin, 16)
        second = self.conductor.attach_volume(self.user, server['uuid'],
                                              vol['id'])
        first = self.client.start(self.ctxt, bdm['attachment_id'])
        exc = self.assertRaises(exception.MigrationInProgress,
                                self.client.start, self.ctxt,
                                second['attachment_id'])
        self.assertIn(server['uuid'], str(exc))
        self.assertEqual([first['id']], [m['id'] for m in self.client.list(
            self.ctxt, instance_uuid=server['uuid'])])

    def test_bad_input_to_every_client_method(self):
        server, bdm = self.create_server()
        before = self._state(server)
        calls = [
            ('src_attachment_id', self.client.start, ('not-a-uuid',)),
            ('src_attachment_id', self.client.start, (42,)),
            ('src_attachment_id', self.client.cancel, (None,)),
            ('dst_attachment_id', self.client.complete,
             (bdm['attachment_id'], 'nope')),
            ('migration_ref', self.client.get, (['x'],)),
        ]
        for field, method, args in calls:
            exc = self.assertRaises(exception.InvalidInput, method,
                                    self.ctxt, *args)
            self.assertIn(field, str(exc))
        exc = self.assertRaises(exception.InvalidInput, self.client.list,
                                self.ctxt, colour='blue')
        self.assertIn('colour', str(exc))
        exc = self.assertRaises(exception.InvalidInput, self.client.list,
                                self.ctxt, status=7)
        self.assertIn('status', str(exc))
        self.assertRaises(TypeError, self.client.complete, self.ctxt,
                          bdm['attachment_id'])
        self.assertEqual(before, self._state(server))

    def test_caller_without_service_role_is_refused(self):
        server, bdm = self.create_server()
        member = volmig_context.RequestContext(
            user_id='mallory', project_id='project-a', roles=['member'])
        exc = self.assertRaises(exception.Forbidden, self.client.start,
                                member, bdm['attachment_id'])
        self.assertIn('volume_migration:start', str(exc))
        self.assertEqual([], self.client.list(self.ctxt))


class OfflineOnlyDriverTest(base.ServicesTestCase):

    def configure(self):
        self.conf_fixture.conf(offline_only=True, group='fake_driver')

    def test_start_on_running_instance_refused(self):
        server, bdm = self.create_server()
        exc = self.assertRaises(exception.InstanceMustBeShutOff,
                                self.client.start, self.ctxt,
                                bdm['attachment_id'])
        self.assertIn(server['uuid'], str(exc))
        self.assertIn('shut the server off', str(exc))
        self.assertEqual([], self.client.list(self.ctxt))
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertIsNone(server['task_state'])

    def test_offline_migration_of_a_shut_off_instance(self):
        server, bdm = self.create_server()
        self.conductor.stop_instance(self.user, server['uuid'])
        self.wait_for_server(server['uuid'], states.VM_STOPPED)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(states.MODE_OFFLINE, migration['mode'])
        # Locked: it may not be started until the migration ends.
        self.assertRaises(exception.InstanceInvalidState,
                          self.conductor.start_instance, self.user,
                          server['uuid'])
        dst = self.dst_attachment(server, bdm)
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        self.assertEqual(dst['id'], self.fake_disk(server, bdm).attachment_id)
        self.conductor.start_instance(self.user, server['uuid'])
        self.wait_for_server(server['uuid'], states.VM_ACTIVE)

"""The conductor ends work that nothing will ever finish."""

from oslo_utils import uuidutils

from tests.functional import base
from volmig import context as volmig_context
from volmig import states
from volmig.db import api as db
from volmig.db import starts


class HealingTest(base.ServicesTestCase):

    def configure(self):
        self.conf_fixture.conf(heal_interval=1, accepted_timeout=1,
                               group='conductor')

    def test_migration_nobody_took_is_failed_and_the_server_unlocked(self):
        server, bdm = self.create_server()
        # What an API that died right after recording a start leaves.
        migration = starts.record(volmig_context.get_admin_context(), {
            'uuid': uuidutils.generate_uuid(),
            'instance_uuid': server['uuid'], 'volume_id': bdm['volume_id'],
            'src_attachment_id': bdm['attachment_id'],
            'host': server['host'], 'mode': states.MODE_LIVE})

        def failed_migration():
            found = self.client.get(self.ctxt, migration['id'])
            return found if found['status'] == states.ERROR else None

        failed = self.wait_until(failed_migration,
                                 what='the stranded migration to be failed')
        self.assertEqual(states.ACCEPTED, failed['error_phase'])
        self.assertIn('no compute agent took the migration',
                      failed['error_reason'])
        self.assertFalse(failed['recovery_needed'])
        self.assertIsNone(self.conductor.instance_get(
            self.admin, server['uuid'])['task_state'])
        # And the volume can be migrated again.
        again = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(states.STARTED, again['status'])

    def test_start_up_reconciliation_leaves_live_requests_alone(self):
        """A migration changed after the agent started is being driven by
        requests that agent serves (a cancel still queued, say); its
        start-up reconciliation must not settle it behind their back."""
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        # Left over: the agent started after the migration last changed.
        [left] = self.conductor.migration_work_for_host(
            self.admin, server['host'], uptime=0)
        self.assertEqual(migration['id'], left['migration']['id'])
        # Live: the agent has run for an hour.
        self.assertEqual([], self.conductor.migration_work_for_host(
            self.admin, server['host'], uptime=3600))

    def test_a_complete_whose_conductor_died_before_connecting_dst(self):
        """A conductor killed between recording a complete and connecting
        dst leaves a migration completing with dst reserved only: what the
        agent is asked to reconcile connects dst first."""
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        dst = self.volumes.create_volume(self.admin, 16)
        reserved = self.volumes.attachment_create(self.admin, dst['id'],
                                                  server['uuid'], 'rw')
        self.assertIsNone(reserved['connection_info'])
        db.migration_update(self.admin, migration['id'], {
            'status': states.COMPLETING,
            'dst_attachment_id': reserved['id']},
            expected_status=states.STARTED)
        [left] = self.conductor.migration_work_for_host(
            self.admin, server['host'], uptime=0)
        self.assertEqual(migration['id'], left['migration']['id'])
        self.assertIsNotNone(left['dst_connection_info'])
        self.assertEqual(left['dst_connection_info'],
                         self.volumes.attachment_get(
                             self.admin, reserved['id'])['connection_info'])

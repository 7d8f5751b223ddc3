"""start, cancel and complete through the real services on fake://."""

import fixtures

from tests.functional import base
from volmig import exception
from volmig import states
from volmig.db import api as db


class MigrationFlowTest(base.ServicesTestCase):

    def test_start_then_complete(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(states.STARTED, migration['status'])
        self.assertEqual(states.MODE_LIVE, migration['mode'])
        self.assertEqual(server['uuid'], migration['instance_uuid'])
        self.assertEqual(bdm['volume_id'], migration['volume_id'])
        self.assertEqual(server['host'], migration['host'])
        self.assertTrue(self.fake_disk(server, bdm).on_overlay)

        dst = self.dst_attachment(server, bdm)
        released = self.client.complete(self.ctxt, bdm['attachment_id'],
                                        dst['id'])
        self.assertIn(released['status'],
                      (states.SRC_RELEASED, states.COMMITTING,
                       states.COMPLETED))
        done = self.client.wait_for(self.ctxt, migration['id'],
                                    states.COMPLETED)
        self.assertEqual(dst['id'], done['dst_attachment_id'])

        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertIsNone(server['task_state'])
        [after] = server['block_devices']
        self.assertEqual(bdm['volume_id'], after['volume_id'])
        self.assertEqual(dst['id'], after['attachment_id'])
        self.assertEqual(bdm['attach_mode'], after['attach_mode'])
        disk = self.fake_disk(server, bdm)
        self.assertEqual(dst['id'], disk.attachment_id)
        self.assertFalse(disk.on_overlay)
        self.assertEqual('attached', self.volumes.attachment_get(
            self.admin, dst['id'])['attach_status'])

    def test_each_move_starts_from_the_volume_the_guest_is_on(self):
        # A block-storage service that completes onto another volume's
        # attachment, keeps that volume and deletes the source attachment
        # (Cinder's flow, without its swap of the volumes' ids).
        server, bdm = self.create_server()
        attachment_id, moved = bdm['attachment_id'], []
        for _ in range(3):
            migration = self.client.start(self.ctxt, attachment_id)
            self.assertEqual(states.STARTED, migration['status'])
            moved.append(migration['id'])
            dst = self.dst_attachment(server, bdm)
            self.client.complete(self.ctxt, attachment_id, dst['id'])
            self.client.wait_for(self.ctxt, migration['id'],
                                 states.COMPLETED)
            self.volumes.attachment_delete(self.admin, attachment_id)
            attachment_id = dst['id']
        self.assertEqual(3, len(set(moved)))
        # The mapping keeps the volume id its server's device is known by,
        # and the attachment the last move left it on.
        [after] = self.conductor.instance_get(
            self.admin, server['uuid'])['block_devices']
        self.assertEqual((bdm['volume_id'], dst['id']),
                         (after['volume_id'], after['attachment_id']))
        self.assertEqual(dst['id'],
                         self.fake_disk(server, after).attachment_id)

    def test_start_then_cancel(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        accepted = self.client.cancel(self.ctxt, bdm['attachment_id'])
        self.assertEqual(migration['id'], accepted['id'])
        self.assertIn(accepted['status'],
                      (states.CANCELLING, states.CANCELLED))
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        self.assertFalse(self.fake_disk(server, bdm).on_overlay)
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertIsNone(server['task_state'])
        self.assertEqual(bdm['attachment_id'],
                         server['block_devices'][0]['attachment_id'])
        # A later complete is an error, and changes nothing.
        dst = self.dst_attachment(server, bdm)
        self.assertRaises(exception.InvalidMigrationState,
                          self.client.complete, self.ctxt,
                          bdm['attachment_id'], dst['id'])
        self.assertEqual(states.CANCELLED, self.client.get(
            self.ctxt, migration['id'])['status'])

    def test_a_cancel_recorded_but_never_sent_goes_out_when_asked_again(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        # As a conductor that recorded the cancel, then died before
        # volmig-api cast it: the agent never heard of it.
        db.migration_update(self.admin, migration['id'],
                            {'status': states.CANCELLING},
                            expected_status=states.STARTED)
        self.assertTrue(self.fake_disk(server, bdm).on_overlay)
        # Far past this test's wait: only the repeat may end it.
        self.conf_fixture.conf(migration_stall_timeout=3600,
                               group='conductor')

        again = self.client.cancel(self.ctxt, bdm['attachment_id'])
        self.assertEqual((migration['id'], states.CANCELLING),
                         (again['id'], again['status']))
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED,
                             timeout=60)
        self.assertFalse(self.fake_disk(server, bdm).on_overlay)
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual(bdm['attachment_id'],
                         server['block_devices'][0]['attachment_id'])
        # Once cancelled, a cancel asked again changes nothing.
        self.assertEqual(states.CANCELLED, self.client.cancel(
            self.ctxt, bdm['attachment_id'])['status'])

    def test_a_cancel_asked_again_while_its_merge_runs_merges_once(self):
        # Long enough for the repeats to reach the agent while it merges.
        self.conf_fixture.conf(job_seconds=3, group='fake_driver')
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        agent = self.services[server['host']].manager
        merges = self.useFixture(fixtures.MockPatchObject(
            agent.driver, 'migration_cancel',
            wraps=agent.driver.migration_cancel)).mock
        self.client.cancel(self.ctxt, bdm['attachment_id'])
        self.wait_until(lambda: agent.jobs.running(migration['id']),
                        what='the merge to run')
        # Asked again of volmig-api (a reconciliation), and cast again
        # to the agent, as a repeat reaches it.
        self.client.cancel(self.ctxt, bdm['attachment_id'])
        healer = self.services['conductor-host'].manager.healer
        work = healer.work(self.admin, db.migration_get(self.admin,
                                                        migration['id']))
        healer.compute_api.migration_cancel(self.admin, server['host'],
                                            work['migration'], work['bdm'])
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED,
                             timeout=60)
        self.assertEqual(1, merges.call_count)
        self.assertFalse(self.fake_disk(server, bdm).on_overlay)

    def test_repeated_calls_return_the_same_migration(self):
        server, bdm = self.create_server()
        first = self.client.start(self.ctxt, bdm['attachment_id'])
        again = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(first['id'], again['id'])
        dst = self.dst_attachment(server, bdm)
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
        repeated = self.client.complete(self.ctxt, bdm['attachment_id'],
                                        dst['id'])
        self.assertEqual(first['id'], repeated['id'])
        self.assertEqual(1, len(self.client.list(
            self.ctxt, instance_uuid=server['uuid'])))

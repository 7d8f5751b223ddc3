"""The conductor's migration flow, without RabbitMQ: its records in a real
database, the volumes of the fake adapter (records, no data)."""

import fixtures
from oslo_utils import uuidutils
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.block_storage import fake
from volmig.compute import rpcapi as compute_rpcapi
from volmig.compute.drivers import base as driver_base
from volmig.conductor import migrations
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db


class ConductorTestBase(base.BaseTestCase):
    """One running server with one volume, on compute host h1."""

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())
        self.useFixture(volmig_fixtures.DatabaseFixture())
        self.ctxt = volmig_context.get_admin_context()
        self.volumes = self.make_volumes()
        self.ended = []
        self.conductor = migrations.MigrationConductor(
            self.volumes, on_end=lambda: self.ended.append(True))
        service_db.update(self.ctxt, compute_rpcapi.BINARY, 'h1',
                          compute_rpcapi.TOPIC, compute_rpcapi.RPC_API_VERSION,
                          {driver_base.LIVE_VOLUME_MIGRATION: True,
                           driver_base.MULTIATTACH: True})
        self.instance = instances_db.instance_create(self.ctxt, {
            'uuid': uuidutils.generate_uuid(), 'name': 'vm', 'host': 'h1',
            'project_id': 'p', 'user_id': 'u', 'vm_state': states.VM_ACTIVE,
            'power_state': states.POWER_RUNNING})
        volume = self.make_volume()
        self.src = self.attach(volume)
        instances_db.bdm_create(self.ctxt, {
            'instance_uuid': self.instance['uuid'],
            'volume_id': volume['id'], 'attachment_id': self.src['id'],
            'attach_mode': 'rw', 'device_name': '/dev/vda'})

    def make_volumes(self):
        return fake.FakeVolumeAdapter()

    def make_volume(self):
        return self.volumes.create_volume(self.ctxt, 16)

    def attach(self, volume):
        attachment = self.volumes.attachment_create(
            self.ctxt, volume['id'], self.instance['uuid'])
        self.volumes.attachment_complete(self.ctxt, attachment['id'])
        return self.volumes.attachment_get(self.ctxt, attachment['id'])

    def started(self):
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        return self.conductor.started(self.ctxt, begun['migration']['id'],
                                      {'start': 1.0})

    def completing(self):
        """A started migration completing to a new volume's attachment:
        the migration as started, and dst's attachment."""
        migration = self.started()
        dst = self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, 16)['id'],
            self.instance['uuid'])
        self.conductor.accept_complete(self.ctxt, self.src['id'], dst['id'])
        return migration, dst



class MigrationConductorTest(ConductorTestBase):

    def test_a_start_is_recorded_once_and_locks_the_server(self):
        first = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        self.assertTrue(first['created'])
        self.assertEqual(states.STARTING, first['migration']['status'])
        self.assertEqual(states.TASK_VOLUME_MIGRATING,
                         instances_db.instance_get(
                             self.ctxt, self.instance['uuid'])['task_state'])
        # Another start while this one is under way gives way to it...
        self.assertRaises(exception.MigrationInProgress,
                          self.conductor.begin, self.ctxt, self.src['id'],
                          starting=True)
        self.conductor.started(self.ctxt, first['migration']['id'], {})
        # ...and once it has started, the same start is answered again.
        again = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        self.assertFalse(again['created'])
        self.assertEqual(first['migration']['id'], again['migration']['id'])

    def test_complete_connects_dst_after_the_status_moved(self):
        migration = self.started()
        dst = self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, 16)['id'],
            self.instance['uuid'])
        accepted = self.conductor.accept_complete(self.ctxt, self.src['id'],
                                                  dst['id'])
        self.assertTrue(accepted['send'])
        self.assertEqual((states.COMPLETING, dst['id']),
                         (accepted['migration']['status'],
                          accepted['migration']['dst_attachment_id']))
        self.assertEqual('attaching', self.volumes.attachment_get(
            self.ctxt, dst['id'])['attach_status'])
        self.assertEqual(migration['id'], accepted['migration']['id'])
        # The same complete again before the agent reported the switch:
        # sent again, as the agent may never have heard of the first
        # (its conductor died before it was cast), with dst as connected.
        again = self.conductor.accept_complete(self.ctxt, self.src['id'],
                                               dst['id'])
        self.assertEqual((True, accepted['dst_connection_info'],
                          states.COMPLETING),
                         (again['send'], again['dst_connection_info'],
                          again['migration']['status']))
        # Once the guest is on dst, nothing more to send.
        self.conductor.switched(self.ctxt, migration['id'], {})
        self.assertFalse(self.conductor.accept_complete(
            self.ctxt, self.src['id'], dst['id'])['send'])

    def test_a_dst_block_storage_connected_is_used_as_it_is(self):
        # As volmig's manager in cinder-volume connects it during the
        # copy, with the source attachment's connector.
        self.started()
        dst = self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, 16)['id'],
            self.instance['uuid'])
        prepared = self.volumes.attachment_update(
            self.ctxt, dst['id'], {'host': 'h1', 'given-by': 'storage'})
        accepted = self.conductor.accept_complete(self.ctxt, self.src['id'],
                                                  dst['id'])
        self.assertTrue(accepted['send'])
        self.assertEqual(prepared['connection_info'],
                         accepted['dst_connection_info'])
        self.assertEqual({'host': 'h1', 'given-by': 'storage'},
                         self.volumes.attachment_get(
                             self.ctxt, dst['id'])['connector'])

    def test_a_refused_complete_changes_nothing(self):
        self.started()
        cancelling = self.conductor.accept_cancel(self.ctxt, self.src['id'])
        self.assertEqual(states.CANCELLING, cancelling['migration']['status'])
        dst = self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, 16)['id'],
            self.instance['uuid'])
        self.assertRaises(exception.InvalidMigrationState,
                          self.conductor.accept_complete, self.ctxt,
                          self.src['id'], dst['id'])
        self.assertEqual('reserved', self.volumes.attachment_get(
            self.ctxt, dst['id'])['attach_status'])

    def test_a_dst_of_another_size_is_refused_before_anything(self):
        migration = self.started()
        dst = self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, 32)['id'],
            self.instance['uuid'])
        error = self.assertRaises(exception.DestinationMismatch,
                                  self.conductor.accept_complete, self.ctxt,
                                  self.src['id'], dst['id'])
        self.assertIn('32 MiB', error.message)
        self.assertEqual(states.STARTED, self.conductor.get(
            self.ctxt, migration['id'])['status'])

    def test_a_failure_unlocks_the_server_and_ends_the_slot(self):
        migration = self.started()
        self.conductor.fail(self.ctxt, migration['id'], 'the disk broke',
                            recovery_needed=False)
        failed = self.conductor.get(self.ctxt, migration['id'])
        self.assertEqual((states.ERROR, 'the disk broke'),
                         (failed['status'], failed['error_reason']))
        self.assertIsNone(instances_db.instance_get(
            self.ctxt, self.instance['uuid'])['task_state'])
        self.assertEqual([True], self.ended)

    def test_dst_is_attached_before_src_released_is_recorded(self):
        # Block storage ends a move once it sees src_released: by then no
        # attachment of the move may still be half made.
        migration, dst = self.completing()
        seen = []
        complete = self.volumes.attachment_complete

        def recording(ctxt, attachment_id):
            seen.append(self.conductor.get(ctxt, migration['id'])['status'])
            complete(ctxt, attachment_id)

        self.volumes.attachment_complete = recording
        switched = self.conductor.switched(self.ctxt, migration['id'], {})
        self.assertEqual([states.COMPLETING], seen)
        self.assertEqual(states.SRC_RELEASED, switched['status'])
        self.assertEqual('attached', self.volumes.attachment_get(
            self.ctxt, dst['id'])['attach_status'])
        self.assertEqual(dst['id'], instances_db.bdm_get_by_volume(
            self.ctxt, self.instance['uuid'],
            switched['volume_id'])['attachment_id'])

    def test_started_keeps_what_an_older_agent_recorded_before(self):
        # Agents older than RPC 1.3 report starting themselves, with its
        # pauses: started merges its own into them instead of replacing.
        begun = self.conductor.begin(self.ctxt, self.src['id'])
        self.assertEqual(states.ACCEPTED, begun['migration']['status'])
        self.conductor.set_status(self.ctxt, begun['migration']['id'],
                                  states.STARTING, {'prepare': 2.0})
        started = self.conductor.started(self.ctxt, begun['migration']['id'],
                                         {'start': 1.0})
        self.assertEqual((states.STARTED, {'prepare': 2.0, 'start': 1.0}),
                         (started['status'], started['pauses_ms']))

    def test_a_repeated_started_changes_nothing(self):
        migration = self.started()
        again = self.conductor.started(self.ctxt, migration['id'],
                                       {'start': 9.0})
        self.assertEqual((states.STARTED, {'start': 1.0}),
                         (again['status'], again['pauses_ms']))

    def test_started_after_a_failure_is_refused(self):
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        self.conductor.fail(self.ctxt, begun['migration']['id'], 'gone',
                            recovery_needed=False)
        error = self.assertRaises(
            exception.InvalidMigrationState, self.conductor.started,
            self.ctxt, begun['migration']['id'], {'start': 1.0})
        self.assertIn(states.ERROR, error.message)
        failed = self.conductor.get(self.ctxt, begun['migration']['id'])
        self.assertEqual((states.ERROR, None),
                         (failed['status'], failed['pauses_ms']))


class TwinReportTest(ConductorTestBase):
    """One report delivered twice at once (an agent asked again while its
    first message waited on a restarted conductor): both read the same
    status, the first writes, and the second's write finds it moved.
    Here the second reads what the first read, once its twin has
    written."""

    def committing(self):
        migration, _ = self.completing()
        self.conductor.switched(self.ctxt, migration['id'], {})
        return self.conductor.report_progress(self.ctxt, migration['id'],
                                              1, 16)

    def read_before_twin(self, migration: dict) -> None:
        """The next read of the migration is ``migration`` as it was."""
        stale = [dict(migration)]
        real = db.migration_get

        def get(ctxt, uuid):
            return stale.pop() if stale else real(ctxt, uuid)
        self.useFixture(fixtures.MockPatchObject(db, 'migration_get', get))

    def test_a_progress_report_that_lost_to_its_twin_is_a_repeat(self):
        migration = self.committing()
        self.read_before_twin(dict(migration, status=states.SRC_RELEASED))
        again = self.conductor.report_progress(self.ctxt, migration['id'],
                                               2, 16)
        self.assertEqual((states.COMMITTING, 2),
                         (again['status'], again['bytes_done']))

    def test_an_end_that_lost_to_its_twin_is_a_repeat(self):
        migration = self.committing()
        self.conductor.job_ended(self.ctxt, migration['id'],
                                 states.COMPLETED, {'commit': 1.0})
        self.read_before_twin(migration)
        again = self.conductor.job_ended(self.ctxt, migration['id'],
                                         states.COMPLETED, {'commit': 2.0})
        # Ended once: its slot is freed once, its pauses are the first's.
        self.assertEqual((states.COMPLETED, {'start': 1.0, 'commit': 1.0}),
                         (again['status'], again['pauses_ms']))
        self.assertEqual([True], self.ended)

    def test_a_write_that_finds_its_status_moved_names_it(self):
        # The status as committed, which a stale reader reads again.
        migration = self.committing()
        error = self.assertRaises(
            exception.MigrationStatusMoved, db.migration_update, self.ctxt,
            migration['id'], {'status': states.ERROR},
            expected_status=states.COMPLETING)
        self.assertIn(states.COMMITTING, error.message)

"""volmig-api's RPC face (what the block-storage client calls), without
RabbitMQ: the API's manager, the conductor and the agent's runner in one
process (tests/unit/in_process.py), on the test's database."""

from oslo_utils import uuidutils

from tests.unit import in_process
from tests.unit import test_migration_conductor
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.db import api as db
from volmig.db import instances as instances_db


class APIManagerTest(test_migration_conductor.ConductorTestBase):

    def setUp(self):
        super().setUp()
        self.deployment = in_process.Deployment(self, self.conductor)
        self.client = self.deployment.client()
        self.service = volmig_context.get_service_context()
        bdm = instances_db.bdm_get_by_attachment(self.ctxt, self.src['id'])
        self.deployment.driver.spawn({'uuid': self.instance['uuid']}, [bdm])
        self.volume_id = bdm['volume_id']

    def disk(self):
        return self.deployment.driver.guest_disk(self.instance['uuid'],
                                                 self.volume_id)

    def sent(self, action):
        return [sent for sent in self.deployment.compute.sent
                if sent[0] == action]

    def dst(self, size_mb=16):
        return self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, size_mb)['id'],
            self.instance['uuid'])

    def test_start_returns_once_nothing_writes_to_src(self):
        migration = self.client.start(self.service, self.src['id'])
        self.assertEqual(states.STARTED, migration['status'])
        self.assertTrue(self.disk().on_overlay)
        # A repeated start is answered from the record; the agent hears
        # of it once.
        again = self.client.start(self.service, self.src['id'])
        self.assertEqual(migration['id'], again['id'])
        self.assertEqual(1, len(self.sent('start')))

    def test_only_an_admin_or_the_block_storage_service_may_start(self):
        user = volmig_context.RequestContext(user_id='u', project_id='p',
                                             roles=['member'])
        error = self.assertRaises(exception.Forbidden, self.client.start,
                                  user, self.src['id'])
        self.assertIn('volume_migration:start', error.message)
        self.assertEqual([], self.sent('start'))
        self.assertEqual([], db.migration_get_all(self.ctxt))

    def test_a_malformed_id_is_refused_before_the_conductor(self):
        error = self.assertRaises(exception.InvalidInput, self.client.start,
                                  self.service, '../etc')
        self.assertIn('src_attachment_id', error.message)
        self.assertEqual([], db.migration_get_all(self.ctxt))

    def test_cancel_is_accepted_then_ends_on_src(self):
        migration = self.client.start(self.service, self.src['id'])
        accepted = self.client.cancel(self.service, self.src['id'])
        self.assertIn(accepted['status'],
                      {states.CANCELLING, states.CANCELLED})
        self.client.wait_for(self.service, migration['id'], states.CANCELLED,
                             timeout=30)
        self.assertFalse(self.disk().on_overlay)
        # A cancel again, once it has ended, sends nothing.
        self.client.cancel(self.service, self.src['id'])
        self.assertEqual(1, len(self.sent('cancel')))

    def test_complete_switches_the_guest_to_dst(self):
        self.client.start(self.service, self.src['id'])
        dst = self.dst()
        released = self.client.complete(self.service, self.src['id'],
                                        dst['id'], timeout=30)
        self.assertIn(released['status'], {states.SRC_RELEASED,
                                           states.COMMITTING,
                                           states.COMPLETED})
        self.assertEqual(dst['id'], self.disk().attachment_id)
        self.assertEqual([dst['id']], [
            bdm['attachment_id'] for bdm in instances_db.bdm_get_all(
                self.ctxt, instance_uuid=self.instance['uuid'])])

    def test_a_refused_complete_reaches_no_agent(self):
        migration = self.client.start(self.service, self.src['id'])
        error = self.assertRaises(exception.DestinationMismatch,
                                  self.client.complete, self.service,
                                  self.src['id'], self.dst(32)['id'])
        self.assertNotIn('Traceback', error.message)
        self.assertEqual([], self.sent('complete'))
        self.assertEqual(states.STARTED, self.client.get(
            self.service, migration['id'])['status'])

    def test_the_list_comes_in_pages(self):
        ids = []
        for _ in range(3):
            migration = self.client.start(self.service, self.src['id'])
            ids.append(migration['id'])
            self.client.cancel(self.service, self.src['id'])
            self.client.wait_for(self.service, migration['id'],
                                 states.CANCELLED, 30)
        first = self.client.list(self.service, limit=2,
                                 instance_uuid=self.instance['uuid'])
        rest = self.client.list(self.service, limit=2,
                                marker=first[-1]['id'])
        self.assertEqual(ids, [m['id'] for m in first + rest])
        for limit, why in ((-1, 'non-negative'), ('2', 'non-negative')):
            error = self.assertRaises(exception.InvalidInput,
                                      self.client.list, self.service,
                                      limit=limit)
            self.assertIn(why, error.message)
        error = self.assertRaises(exception.MarkerNotFound,
                                  self.client.list, self.service, limit=1,
                                  marker=uuidutils.generate_uuid())
        self.assertIn('not found', error.message)

    def test_list_filters_are_checked(self):
        migration = self.client.start(self.service, self.src['id'])
        self.assertEqual([migration['id']], [
            m['id'] for m in self.client.list(
                self.service, instance_uuid=self.instance['uuid'])])
        self.assertEqual([], self.client.list(
            self.service, instance_uuid=uuidutils.generate_uuid()))
        error = self.assertRaises(exception.InvalidInput, self.client.list,
                                  self.service, colour='blue')
        self.assertIn('colour', error.message)

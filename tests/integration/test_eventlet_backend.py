"""The opt-in eventlet backend still carries a migration end to end."""

from tests.integration import base
from volmig import states


class EventletComputeTest(base.ProcessTestCase):

    COMPUTES = 1
    COMPUTE_OPTIONS = {
        'compute-1': {('DEFAULT', 'concurrency_backend'): 'eventlet'}}

    def test_migration_through_an_eventlet_agent(self):
        with open(self.processes['compute-1'].log_path) as log:
            self.assertIn('(concurrency: eventlet)', log.read())
        with open(self.processes['conductor'].log_path) as log:
            self.assertIn('(concurrency: threading)', log.read())
        server, bdm = self.create_server('compute-1')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(states.STARTED, migration['status'])
        dst = self.dst_attachment(server, bdm)
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
        done = self.client.wait_for(self.ctxt, migration['id'],
                                    states.COMPLETED)
        self.assertEqual(dst['id'], done['dst_attachment_id'])

"""The one start routine and the start's owner, without RabbitMQ: the
conductor's records in a real database; the agent is a stub, the boundary
of a service that does not run here."""

import oslo_messaging as messaging

from tests.unit import test_migration_conductor
from volmig import exception
from volmig import owners
from volmig import states
from volmig.api import manager as api_manager
from volmig.conductor import services
from volmig.conductor import start
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db


class Agent:
    """Answers migration_start as an agent would, or fails as told."""

    def __init__(self, answer):
        self.answer = answer
        self.sent = []

    def migration_start(self, ctxt, host, migration, bdm):
        self.sent.append((host, migration['id'], bdm['attachment_id']))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class StartTest(test_migration_conductor.ConductorTestBase):

    def setUp(self):
        super().setUp()
        self.owner = owners.identity(api_manager.BINARY, 'api-1')
        self.report('api-1', owners.GENERATION)

    def report(self, host, generation):
        service_db.update(self.ctxt, api_manager.BINARY, host,
                          api_manager.TOPIC, '1.0',
                          {owners.CAPABILITY: generation})

    def begin(self):
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True, owner=self.owner)
        return begun['migration'], begun['bdm']

    def record(self, migration_id):
        return db.migration_get(self.ctxt, migration_id)

    def test_an_answered_start_is_recorded_and_no_longer_owned(self):
        migration, bdm = self.begin()
        self.assertTrue(services.in_flight(self.ctxt,
                                             self.record(migration['id'])))
        agent = Agent({'pauses': {'start': 2.5}})
        started = start.run(self.ctxt, agent, self.conductor, migration, bdm)
        self.assertEqual([('h1', migration['id'], self.src['id'])],
                         agent.sent)
        self.assertEqual((states.STARTED, {'start': 2.5}),
                         (started['status'], started['pauses_ms']))
        self.assertNotIn('owner', started)
        self.assertIsNone(self.record(migration['id'])['owner'])

    def test_a_refused_start_fails_the_migration_and_frees_the_server(self):
        migration, bdm = self.begin()
        agent = Agent(exception.DriverError(action='start',
                                            reason='no overlay room'))
        self.assertRaises(exception.DriverError, start.run, self.ctxt, agent,
                          self.conductor, migration, bdm)
        failed = self.record(migration['id'])
        self.assertEqual((states.ERROR, False, None),
                         (failed['status'], failed['recovery_needed'],
                          failed['owner']))
        self.assertIn('no overlay room', failed['error_reason'])
        self.assertIsNone(instances_db.instance_get(
            self.ctxt, self.instance['uuid'])['task_state'])

    def test_a_silent_agent_hands_the_start_to_the_healer(self):
        migration, bdm = self.begin()
        agent = Agent(messaging.MessagingTimeout('no reply'))
        error = self.assertRaises(exception.ComputeUnavailable, start.run,
                                  self.ctxt, agent, self.conductor,
                                  migration, bdm)
        self.assertIn('h1', error.message)
        # Still starting (the guest may be on an overlay), but nobody's:
        # the healer may reconcile it at once, with no timer.
        released = self.record(migration['id'])
        self.assertEqual((states.STARTING, None),
                         (released['status'], released['owner']))
        self.assertFalse(services.in_flight(self.ctxt, released))

    def test_a_restarted_owner_no_longer_holds_its_start(self):
        migration, _bdm = self.begin()
        self.report('api-1', 'the next process')
        self.assertFalse(services.in_flight(self.ctxt,
                                              self.record(migration['id'])))

    def test_an_owner_whose_service_is_gone_holds_nothing(self):
        self.owner = owners.identity(api_manager.BINARY, 'api-2')
        migration, _bdm = self.begin()
        self.assertFalse(services.in_flight(self.ctxt,
                                              self.record(migration['id'])))

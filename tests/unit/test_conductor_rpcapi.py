"""The conductor client under a version cap, against a real RPC server
on fake:// that speaks only what a 1.2 conductor speaks: new agents
and APIs beside an old conductor."""

import oslo_messaging as messaging
from oslotest import base

from tests import fixtures
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import states
from volmig.conductor import operator_rpcapi
from volmig.conductor import rpcapi


class OldConductorEndpoint:
    """The reports of a conductor of RPC 1.2."""

    target = messaging.Target(version='1.2')

    def __init__(self):
        self.received = []

    def migration_set_status(self, ctxt, migration_id, status, pauses=None):
        self.received.append(('migration_set_status', status))
        return {'id': migration_id, 'status': status}

    def instance_update(self, ctxt, instance_uuid, values):
        self.received.append(('instance_update', values))
        return dict(values, uuid=instance_uuid)

    def service_min_version(self, ctxt, binary):
        return '1.2'

    def service_get_all(self, ctxt, binary):
        # The whole list, as conductors before 1.8 answer.
        return [{'id': n, 'host': 'h%d' % (n % 2), 'binary': binary}
                for n in range(1, 6)]


class ConductorVersionCapTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(fixtures.ConfFixture()).conf
        # Where its servers remember the nonces of what they took.
        self.useFixture(fixtures.DatabaseFixture())
        self.useFixture(fixtures.RPCFixture())
        self.endpoint = OldConductorEndpoint()
        server = rpc.get_server(rpcapi.TOPIC, 'conductor',
                                [self.endpoint])
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.ctxt = volmig_context.get_admin_context()

    def _api(self, cap):
        self.conf(conductor=cap, group='upgrade_levels')
        return rpcapi.ConductorAPI()

    def test_auto_finds_the_old_conductor(self):
        self.assertFalse(self._api('auto').can_send_version(
            rpcapi.OWNER_VERSION))

    def test_alias_of_the_old_release(self):
        self.assertFalse(self._api('2026.2').can_send_version(
            rpcapi.OWNER_VERSION))
        self.assertTrue(self._api('2026.2').can_send_version('1.2'))

    def test_an_agent_reports_what_an_old_conductor_understands(self):
        api = self._api('auto')
        api.migration_switched(self.ctxt, 'm-1', {'switch': 1.0})
        api.migration_job_ended(self.ctxt, 'm-1', states.COMPLETED, {})
        api.instance_power_changed(self.ctxt, 'i-1', states.POWER_SHUTDOWN,
                                   states.VM_STOPPED)
        self.assertEqual(
            [('migration_set_status', states.SRC_RELEASED),
             ('migration_set_status', states.COMMITTING),
             ('migration_set_status', states.COMPLETED),
             ('instance_update', {'power_state': states.POWER_SHUTDOWN,
                                  'vm_state': states.VM_STOPPED,
                                  'task_state': None})],
            self.endpoint.received)
        # An old conductor cannot say what to reconcile: nothing is asked.
        self.assertEqual([], api.migration_work_for_host(self.ctxt, 'h'))

    def test_an_old_conductors_whole_list_is_cut_into_pages(self):
        api = self._api('auto')
        self.assertEqual([1, 3], [s['id'] for s in api.service_get_all(
            self.ctxt, 'volmig-compute', host='h1', limit=2)])
        self.assertEqual([5], [s['id'] for s in api.service_get_all(
            self.ctxt, 'volmig-compute', host='h1', limit=2, marker=3)])
        self.assertRaises(exception.MarkerNotFound, api.service_get_all,
                          self.ctxt, 'volmig-compute', host='h1', marker=2)

    def test_a_conductor_that_registers_between_the_check_and_the_call(self):
        """Its first answer is "no conductor registered yet"; the next,
        its version. The client asks nothing newer than 1.0 until it
        knows, rather than checking on the uncapped probe and calling on
        the capped client (a rolling-upgrade test's list was refused
        so: 1.8 over the cap of 1.3)."""
        answers = iter([None])
        self.endpoint.service_min_version = (
            lambda ctxt, binary: next(answers, '1.2'))
        api = self._api('auto')
        self.assertEqual([1, 2, 3, 4, 5], [
            s['id'] for s in api.service_get_all(self.ctxt, 'b')])
        self.assertFalse(api.can_send_version(rpcapi.PAGES_VERSION))

    def test_an_api_records_a_start_the_old_way(self):
        api = self._api('auto')
        begun = api.migration_started(self.ctxt, {'id': 'm-1'}, {})
        self.assertEqual(states.STARTED, begun['status'])
        self.assertEqual([('migration_set_status', states.STARTING),
                          ('migration_set_status', states.STARTED)],
                         self.endpoint.received)


class Recording:

    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, topic, received):
        self.topic = topic
        self.received = received

    def delete_instance(self, ctxt, instance_uuid):
        self.received.append((self.topic, 'delete_instance'))

    def migration_abort(self, ctxt, migration_id):
        self.received.append((self.topic, 'migration_abort'))

    def service_min_version(self, ctxt, binary):
        return rpcapi.RPC_API_VERSION


class OperatorTopicTest(base.BaseTestCase):
    """The calls that delete or override records go to their own topic,
    and to the main one only for a conductor older than 1.6."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(fixtures.ConfFixture()).conf
        # Where its servers remember the nonces of what they took.
        self.useFixture(fixtures.DatabaseFixture())
        self.useFixture(fixtures.RPCFixture())
        self.received = []
        for topic in (rpcapi.TOPIC, rpcapi.OPERATOR_TOPIC):
            server = rpc.get_server(topic, 'conductor',
                                    [Recording(topic, self.received)])
            server.start()
            self.addCleanup(server.wait)
            self.addCleanup(server.stop)
        self.ctxt = volmig_context.get_admin_context()

    def _calls(self, cap):
        self.conf(conductor=cap, group='upgrade_levels')
        api = operator_rpcapi.OperatorAPI()
        api.delete_instance(self.ctxt, 'i-1')
        api.migration_abort(self.ctxt, 'm-1')
        return self.received

    def test_their_own_topic(self):
        self.assertEqual([(rpcapi.OPERATOR_TOPIC, 'delete_instance'),
                          (rpcapi.OPERATOR_TOPIC, 'migration_abort')],
                         self._calls('auto'))

    def test_the_client_every_service_gets_has_none_of_them(self):
        # What an agent or block storage is given: a bug that called an
        # operator method from there fails here, not in RabbitMQ's refusal.
        api = rpcapi.ConductorAPI()
        for method in ('delete_instance', 'migration_abort',
                       'migration_force_complete', 'migration_recover',
                       'instance_reset_state', 'service_set_disabled',
                       'service_delete', 'migration_count_by_status'):
            self.assertFalse(hasattr(api, method), method)
            self.assertTrue(callable(getattr(
                operator_rpcapi.OperatorAPI(), method)), method)

    def test_the_main_topic_of_an_older_conductor(self):
        self.assertEqual([(rpcapi.TOPIC, 'delete_instance'),
                          (rpcapi.TOPIC, 'migration_abort')],
                         self._calls('1.5'))

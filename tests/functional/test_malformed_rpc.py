"""Malformed RPC payloads to every method of every service.

Each one is refused with a typed error that names the problem; no
service dies and no record is written.
"""

import inspect

import hypothesis
from hypothesis import strategies as st
import oslo_messaging as messaging

from tests.functional import base
from volmig import exception
from volmig import rpc
from volmig import service
from volmig.conductor import operator_manager
from volmig.conductor import rpcapi

# Any JSON value a caller could send.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)


def endpoints(manager_class):
    """The RPC methods of a manager and their required arguments."""
    for name, method in inspect.getmembers(manager_class):
        if getattr(method, 'rpc_endpoint', False):
            parameters = inspect.signature(method).parameters
            yield name, [p for p in list(parameters)[2:]
                         if parameters[p].default is inspect.Parameter.empty]


class MalformedRPCTest(base.ServicesTestCase):

    def configure(self):
        pools = self.useFixture(__import__('fixtures').TempDir()).path
        self.conf_fixture.conf(pools={'pool-a': pools + '/pool-a'},
                               group='storage')

    def service_list(self):
        return super().service_list() + [(service.VOLUME, 'volume-host')]

    def _client(self, binary, topic=None):
        host = self.services_by_binary[binary]
        topic = topic or service._KINDS[binary][0]
        return rpc.get_client(topic, '1.0').prepare(
            server=host.host, version='1.0', timeout=20)

    def every_method(self):
        """(client, method, required arguments) of every RPC method of
        every service, on each topic it is served on."""
        for binary, server in self.services_by_binary.items():
            topics = getattr(server.manager, 'rpc_topics',
                             lambda s=server: {s.topic: [s.manager]})()
            for topic, served in topics.items():
                client = self._client(binary, topic)
                for endpoint in served:
                    for name, required in endpoints(type(endpoint)):
                        yield client, name, required

    def setUp(self):
        super().setUp()
        self.services_by_binary = {server.binary: server
                                   for server in self.services.values()}

    def records(self):
        return (self.conductor.instance_list(self.admin),
                self.client.list(self.ctxt))

    def test_missing_and_unknown_arguments_are_refused(self):
        before = self.records()
        called = 0
        for client, name, required in self.every_method():
            calls = [{'bogus_argument': 1}]
            if required:
                calls.append({})
            for kwargs in calls:
                exc = self.assertRaises(exception.InvalidInput, client.call,
                                        self.admin, name, **kwargs)
                self.assertIn(name, exc.message)
                self.assertNotIn('Traceback', exc.message)
                called += 1
        # Every service's every method was tried, and all still answer.
        self.assertGreater(called, 60)
        self.assertEqual(before, self.records())
        self.assertEqual(4, len({s['binary'] for s in
                                 self.conductor.service_get_all(self.admin,
                                                                None)}))

    @hypothesis.settings(max_examples=40, deadline=None, derandomize=True,
                         suppress_health_check=list(
                             hypothesis.HealthCheck))
    @hypothesis.given(method=st.sampled_from(
        ['migration_start', 'migration_cancel', 'migration_get']),
        value=JSON)
    def test_the_block_storage_face_refuses_any_value(self, method, value):
        argument = ('migration_ref' if method == 'migration_get'
                    else 'src_attachment_id')
        client = self._client(service.API)
        try:
            client.call(self.ctxt, method, **{argument: value})
        except exception.VolmigException as exc:
            self.assertLess(exc.code, 500, exc.message)
        except messaging.MessagingTimeout:
            self.fail('volmig-api did not answer %s(%r)' % (method, value))
        else:
            self.fail('%s(%r) was accepted' % (method, value))
        self.assertEqual([], self.client.list(self.ctxt))

    def test_operator_calls_are_served_on_their_topic_alone(self):
        main = self._client(service.CONDUCTOR)
        operator = self._client(service.CONDUCTOR, rpcapi.OPERATOR_TOPIC)
        for name, required in endpoints(operator_manager.OperatorEndpoint):
            arguments = dict.fromkeys(required, 'x')
            # Reaches the method, which refuses the bogus id itself.
            self.assertRaises(exception.VolmigException, operator.call,
                              self.admin, name, **arguments)
            # As over RabbitMQ: a remote error that names it.
            error = self.assertRaises(messaging.RemoteError, main.call,
                                      self.admin, name, **arguments)
            self.assertEqual('NoSuchMethod', error.exc_type)
            self.assertIn(name, str(error))

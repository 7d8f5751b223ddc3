"""What an RPC method's caller gets when the method fails: a typed error
whose message names the problem, never a traceback; and how long each
request took to serve, in the process's metrics."""

import logging
import os

import fixtures
import oslo_messaging as messaging
from oslotest import base
import prometheus_client

from tests import fixtures as volmig_fixtures
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import signing
from volmig.conf import CONF
from volmig.signing import keys


class Clock:
    """Stands for the time module in volmig.rpc: the endpoint below
    advances it by what serving its request took."""

    def __init__(self):
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class Endpoint:

    def __init__(self, error, clock=None):
        self.error = error
        self.clock = clock

    @rpc.endpoint
    def act(self, ctxt, value):
        if self.clock is not None:
            # What serving this request took.
            self.clock.now += value
        if self.error is not None:
            raise self.error
        return value


class EndpointTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())

    def act(self, error, **kwargs):
        """What the RPC server would send back: oslo.messaging unwraps
        the refusals the method declares it expects."""
        raised = self.assertRaises(messaging.ExpectedException,
                                   Endpoint(error).act, {},
                                   **(kwargs or {'value': 1}))
        return raised.exc_info[1]

    def test_a_refusal_keeps_its_type_and_message(self):
        refusal = exception.InvalidInput(field='value', reason='odd')
        self.assertIs(refusal, self.act(refusal))

    def test_a_bug_is_a_typed_error_without_its_traceback(self):
        raised = self.act(KeyError('a-volume-id'))
        self.assertIsInstance(raised, exception.UnexpectedError)
        self.assertEqual(500, raised.code)
        self.assertIn('act failed unexpectedly (KeyError)', raised.message)
        self.assertNotIn('a-volume-id', raised.message)
        self.assertNotIn('Traceback', raised.message)
        # Nothing chains it to the original for oslo.messaging to format.
        self.assertIsNone(raised.__cause__)

    def test_a_relayed_bug_is_named_as_raised(self):
        relayed = type('AttributeError_Remote', (AttributeError,), {})(
            "module has no attribute 'x'\nTraceback (most recent call "
            "last):\n  File ...")
        raised = self.act(relayed)
        self.assertIn('(AttributeError)', raised.message)
        self.assertNotIn('Traceback', raised.message)

    def test_a_silent_service_behind_the_method_is_a_503(self):
        logged = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        raised = self.act(messaging.MessagingTimeout('no reply on 42'))
        self.assertIsInstance(raised, exception.ServiceTimeout)
        self.assertEqual(503, raised.code)
        self.assertIn('act waits on', raised.message)
        # Said in this service's log too: a cast's sender never hears it.
        self.assertIn('act: a call it made went unanswered: no reply on 42',
                      logged.output)

    def test_arguments_that_do_not_fit_are_refused_before_the_call(self):
        raised = self.act(None, colour=1)
        self.assertIsInstance(raised, exception.InvalidInput)
        self.assertIn('arguments of act', raised.message)


class ServedTimeTest(base.BaseTestCase):
    """Each request is timed around the method, answered or refused."""

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())
        self.clock = Clock()
        self.useFixture(fixtures.MockPatchObject(rpc, 'time', self.clock))

    @staticmethod
    def served(method='act') -> tuple[float, float]:
        """(requests, seconds) served so far by ``method``."""
        return tuple(prometheus_client.REGISTRY.get_sample_value(
            'volmig_rpc_request_seconds_%s' % part, {'method': method}) or 0
            for part in ('count', 'sum'))

    def test_an_answer_and_a_refusal_are_each_timed(self):
        count, seconds = self.served()
        self.assertEqual(0.25, Endpoint(None, self.clock).act({}, value=0.25))
        self.assertRaises(messaging.ExpectedException,
                          Endpoint(exception.InvalidInput(
                              field='value', reason='odd'), self.clock).act,
                          {}, value=1.5)
        self.assertEqual((count + 2, seconds + 1.75), self.served())


class Senders:

    @rpc.endpoint
    def operator_only(self, ctxt):
        return 'done'

    @rpc.endpoint(senders=(signing.COMPUTE,))
    def report(self, ctxt, host):
        signing.check_host(ctxt, host, 'report')
        return host


class SendersTest(base.BaseTestCase):
    """Who may call a method, once the signature named the sender."""

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())

    @staticmethod
    def ctxt(service=None, host='compute-1'):
        return volmig_context.RequestContext(
            sender=signing.Sender(service, host) if service else None)

    def served(self, method, ctxt, **kwargs):
        try:
            return getattr(Senders(), method)(ctxt, **kwargs)
        except messaging.ExpectedException as exc:
            raise exc.exc_info[1] from None

    def test_controllers_and_the_named_kinds_only(self):
        self.assertEqual('done', self.served(
            'operator_only', self.ctxt(signing.CONTROLLER)))
        # Not received over RPC (or unsigned, where the operator allows).
        self.assertEqual('done', self.served('operator_only', self.ctxt()))
        for kind in (signing.COMPUTE, signing.VOLUME, signing.CLIENT):
            error = self.assertRaises(exception.MessageRefused, self.served,
                                      'operator_only', self.ctxt(kind))
            self.assertIn('not a method %s may call' % kind, str(error))
        self.assertEqual('compute-1', self.served(
            'report', self.ctxt(signing.COMPUTE), host='compute-1'))
        self.assertRaises(exception.MessageRefused, self.served, 'report',
                          self.ctxt(signing.VOLUME), host='compute-1')

    def test_an_agent_speaks_of_its_own_host_only(self):
        error = self.assertRaises(
            exception.MessageRefused, self.served, 'report',
            self.ctxt(signing.COMPUTE), host='compute-2')
        self.assertIn('reports on its own records only', str(error))
        self.assertEqual('compute-2', self.served(
            'report', self.ctxt(signing.CONTROLLER), host='compute-2'))

    def test_unsigned_only_where_the_previous_release_calls(self):
        unsigned = volmig_context.RequestContext(
            sender=signing.Unsigned(lambda service, host: host == 'signs'))
        error = self.assertRaises(exception.MessageRefused, self.served,
                                  'operator_only', unsigned)
        self.assertIn('not a method the previous release calls', str(error))
        error = self.assertRaises(exception.MessageRefused, self.served,
                                  'report', unsigned, host='compute-1')
        self.assertIn('not a method the previous release calls', str(error))


class PreviousRelease:

    @rpc.endpoint(senders=(signing.COMPUTE,), unsigned=True)
    def report(self, ctxt, host):
        signing.check_host(ctxt, host, 'report')
        return host


class UnsignedTest(base.BaseTestCase):
    """While an upgrade lets unsigned messages in, they reach only the
    methods marked for it, on hosts that do not sign yet."""

    def test_a_host_that_signs_is_spoken_for_by_its_seal_alone(self):
        self.useFixture(volmig_fixtures.ConfFixture())
        unsigned = volmig_context.RequestContext(
            sender=signing.Unsigned(lambda service, host: host == 'new'))
        self.assertEqual('old', PreviousRelease().report(unsigned,
                                                         host='old'))
        raised = self.assertRaises(messaging.ExpectedException,
                                   PreviousRelease().report, unsigned,
                                   host='new')
        self.assertIn('reports on its own records only',
                      str(raised.exc_info[1]))


class Recorder:
    """Keeps the context each message's method ran in."""

    def __init__(self):
        self.contexts = []

    @rpc.endpoint(senders=signing.HOSTS)
    def report(self, ctxt):
        self.contexts.append(ctxt)


class ReceivedContextTest(base.BaseTestCase):
    """A host's message carries nothing of a caller that volmig would act
    on: no token, no catalog, no role; the controllers' carry theirs."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(volmig_fixtures.ConfFixture())
        self.useFixture(volmig_fixtures.DatabaseFixture())
        self.useFixture(volmig_fixtures.RPCFixture())
        self.recorder = Recorder()
        server = rpc.get_server('volmig-conductor', 'conductor',
                                [self.recorder])
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        # What a host writes in its context: a token, a catalog that names
        # its own server, and an admin's roles.
        self.sent = volmig_context.RequestContext(
            user_id='u', project_id='p', roles=['admin', 'member'],
            is_admin=True, auth_token='secret-token', request_id='req-1',
            service_catalog=[{'type': 'volumev3', 'endpoints': [
                {'publicURL': 'http://attacker.example:8776/v3'}]}])

    def received_from(self, service: str, host: str):
        """What the method gets of ``self.sent``, sent by (service,
        host) with that host's own key."""
        key_file = volmig_fixtures.export_key(
            self.conf.key_file, service, host,
            os.path.join(self.conf.state_path, '%s.json' % service))
        # The server reads the record again now, not within a second.
        rpc.transport().keyring.registry.forget()
        transport = rpc.get_transport(CONF)
        transport.keyring = keys.Keyring(key_file, host)
        self.addCleanup(transport.cleanup)
        rpc.get_client('volmig-conductor', '1.0',
                       rpc_transport=transport).call(self.sent, 'report')
        return self.recorder.contexts[-1]

    def test_a_host_sends_no_token_catalog_or_role(self):
        for service, roles in ((signing.COMPUTE, ['admin', 'service']),
                               (signing.VOLUME, ['service']),
                               (signing.CLIENT, ['service'])):
            ctxt = self.received_from(service, 'host-1')
            self.assertEqual(signing.Sender(service, 'host-1'), ctxt.sender)
            self.assertIsNone(ctxt.auth_token)
            self.assertEqual([], ctxt.service_catalog)
            self.assertEqual(roles, ctxt.roles)
            self.assertNotEqual('p', ctxt.project_id)
            # Its request id still follows the request.
            self.assertEqual('req-1', ctxt.request_id)

    def test_a_controller_sends_the_users_request_as_it_is(self):
        rpc.get_client('volmig-conductor', '1.0').call(self.sent, 'report')
        ctxt = self.recorder.contexts[-1]
        self.assertEqual(('secret-token', ['admin', 'member']),
                         (ctxt.auth_token, ctxt.roles))
        self.assertEqual('volumev3', ctxt.service_catalog[0]['type'])


"""What an RPC method's caller gets when the method fails: a typed error
whose message names the problem, never a traceback."""

import oslo_messaging as messaging
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import exception
from volmig import rpc


class Endpoint:

    def __init__(self, error):
        self.error = error

    @rpc.endpoint
    def act(self, ctxt, value):
        raise self.error


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
        raised = self.act(messaging.MessagingTimeout('no reply on 42'))
        self.assertIsInstance(raised, exception.ServiceTimeout)
        self.assertEqual(503, raised.code)
        self.assertIn('act waits on', raised.message)

    def test_arguments_that_do_not_fit_are_refused_before_the_call(self):
        raised = self.act(None, colour=1)
        self.assertIsInstance(raised, exception.InvalidInput)
        self.assertIn('arguments of act', raised.message)

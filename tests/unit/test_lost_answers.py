"""A request whose answer is lost is asked again where the caller must
not take that for a failure (``rpc.until_answered``), and only there: a
refusal raises at once, and a start is never asked twice."""

import fixtures
import oslo_messaging as messaging
from oslotest import base

from volmig import client
from volmig import exception
from volmig import rpc


class Answers:
    """Serves calls by name: each of ``lost`` times first, the answer
    is lost; then ``answer`` (raised if an exception)."""

    def __init__(self, lost: list, answer):
        self.lost = list(lost)
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, method='ask'):
        self.asked.append(method)
        if self.lost:
            raise self.lost.pop(0)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Client(client.MigrationClient):
    """volmig-api's client on ``answers``, with no transport."""

    def __init__(self, answers):
        self._poll_interval = 0
        self.answers = answers

    def _call(self, ctxt, method, **kwargs):
        return self.answers(method)


class UntilAnsweredTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch('volmig.rpc.ASK_AGAIN_FIRST',
                                             0.001))

    def test_each_kind_of_lost_answer_is_asked_again(self):
        answers = Answers([messaging.MessagingTimeout('t'),
                           exception.ServiceTimeout(method='m'),
                           messaging.MessageDeliveryFailure('f')],
                          {'status': 'completed'})
        self.assertEqual({'status': 'completed'},
                         rpc.until_answered(answers, 'a test'))
        self.assertEqual(4, len(answers.asked))

    def test_a_refusal_raises_at_once(self):
        answers = Answers([messaging.MessagingTimeout('t')],
                          exception.InvalidMigrationState(
                              action='complete', migration_id='m',
                              status='error'))
        self.assertRaises(exception.InvalidMigrationState,
                          rpc.until_answered, answers, 'a test')
        self.assertEqual(2, len(answers.asked))

    def test_a_patient_client_asks_again_but_never_a_start(self):
        answers = Answers([messaging.MessagingTimeout('t')] * 2,
                          {'id': 'm', 'status': 'started'})
        impatient = Client(answers)
        patient = impatient.patient()
        self.assertEqual('started', patient.get(None, 'm')['status'])
        self.assertEqual(['migration_get'] * 3, answers.asked)
        # The client it came from is as it was.
        answers.lost = [messaging.MessagingTimeout('t')]
        self.assertRaises(messaging.MessagingTimeout, impatient.get, None,
                          'm')
        # A start's lost answer may have started it: the caller cancels.
        answers.lost = [messaging.MessagingTimeout('t')]
        answers.asked = []
        self.assertRaises(messaging.MessagingTimeout, patient.start, None,
                          'a-1')
        self.assertEqual(['migration_start'], answers.asked)


class WaitTest(base.BaseTestCase):

    def test_the_first_pauses_are_the_caller_s_then_the_client_s(self):
        answers = Answers([], None)
        statuses = ['completing'] * 4 + ['src_released']
        waiter = Client(answers)
        waiter._poll_interval = 0.2
        waiter.get = lambda ctxt, migration_id: {'status': statuses.pop(0)}
        slept: list[float] = []
        self.useFixture(fixtures.MonkeyPatch('time.sleep', slept.append))
        self.assertEqual({'status': 'src_released'}, waiter.wait_for(
            None, 'm', 'src_released', poll_intervals=(0.02, 0.02)))
        self.assertEqual([0.02, 0.02, 0.2, 0.2], slept)
        # Without them, every pause is the client's.
        statuses[:] = ['completing', 'src_released']
        del slept[:]
        waiter.wait_for(None, 'm', 'src_released')
        self.assertEqual([0.2], slept)

from oslotest import base

from volmig import exception
from volmig import states

LEGAL = [
    # Out of a concurrency cap's queue; RPC < 1.3 agents take accepted.
    (states.QUEUED, states.STARTING),
    (states.QUEUED, states.ACCEPTED),
    # Cancelled while queued: no agent ever heard of it.
    (states.QUEUED, states.CANCELLED),
    (states.ACCEPTED, states.STARTING),
    (states.STARTING, states.STARTED),
    (states.STARTED, states.CANCELLING),
    (states.CANCELLING, states.CANCELLED),
    (states.STARTED, states.COMPLETING),
    (states.COMPLETING, states.SRC_RELEASED),
    # dst could not be connected, before any agent heard of the complete.
    (states.COMPLETING, states.STARTED),
    (states.SRC_RELEASED, states.COMMITTING),
    # A commit with nothing to merge (a read-only disk).
    (states.SRC_RELEASED, states.COMPLETED),
    (states.COMMITTING, states.COMPLETED),
]


class MigrationStateMachineTest(base.BaseTestCase):

    def test_legal_transitions(self):
        for old, new in LEGAL:
            states.check_transition('m', old, new)

    def test_every_other_transition_is_refused(self):
        for old in states.ALL:
            for new in states.ALL - {states.ERROR}:
                if (old, new) in LEGAL:
                    continue
                exc = self.assertRaises(exception.InvalidMigrationState,
                                        states.check_transition, 'm', old,
                                        new)
                self.assertIn(old, str(exc))

    def test_error_from_any_non_terminal_status(self):
        for old in states.IN_PROGRESS:
            states.check_transition('m', old, states.ERROR)
        for old in states.TERMINAL:
            self.assertRaises(exception.InvalidMigrationState,
                              states.check_transition, 'm', old,
                              states.ERROR)

    def test_in_progress_is_every_non_terminal_status(self):
        # Seed 004's bug: "accepted" was not counted as in progress.
        self.assertIn(states.ACCEPTED, states.IN_PROGRESS)
        self.assertEqual(states.ALL, states.IN_PROGRESS | states.TERMINAL)
        self.assertFalse(states.IN_PROGRESS & states.TERMINAL)

    def test_unknown_status(self):
        exc = self.assertRaises(exception.InvalidInput,
                                states.check_transition, 'm',
                                states.STARTED, 'paused')
        self.assertIn('paused', str(exc))


class MoveStateMachineTest(base.BaseTestCase):
    """Cinder's migrations: rolled back up to the copy, then only
    forward."""

    MOVE_STEPS = [states.MOVE_REQUESTED, states.MOVE_STARTING,
                  states.MOVE_COPYING, states.MOVE_COMPLETING,
                  states.MOVE_RELEASING, states.MOVE_NOTIFYING,
                  states.MOVE_DONE]

    def test_each_step_leads_to_the_next(self):
        for old, new in zip(self.MOVE_STEPS[:-1], self.MOVE_STEPS[1:],
                            strict=True):
            states.check_move_transition('v', old, new)
        states.check_move_transition('v', states.MOVE_FAILING,
                                     states.MOVE_FAILED)

    def test_no_failure_once_the_guests_may_be_on_the_new_volume(self):
        for old in self.MOVE_STEPS[:3]:
            states.check_move_transition('v', old, states.MOVE_FAILING)
        for old in self.MOVE_STEPS[3:]:
            exc = self.assertRaises(exception.Conflict,
                                    states.check_move_transition, 'v', old,
                                    states.MOVE_FAILING)
            self.assertIn('from %s to failing' % old, str(exc))

    def test_no_step_is_skipped_or_repeated_backwards(self):
        for i, old in enumerate(self.MOVE_STEPS):
            for new in self.MOVE_STEPS[:i] + self.MOVE_STEPS[i + 2:]:
                self.assertRaises(exception.Conflict,
                                  states.check_move_transition, 'v', old,
                                  new)

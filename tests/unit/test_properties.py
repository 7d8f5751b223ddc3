"""Properties of the state machine and the rules, over generated input."""

import hypothesis
from hypothesis import strategies as st
from oslotest import base

from volmig import exception
from volmig import states
from volmig.conductor import rules

SETTINGS = hypothesis.settings(max_examples=300, deadline=None,
                               derandomize=True)

ATTACHMENT = st.fixed_dictionaries({'attach_mode': st.sampled_from(
    ['rw', 'ro'])})
POWER = st.sampled_from([states.POWER_RUNNING, states.POWER_SHUTDOWN,
                         states.POWER_NOSTATE])


class StateMachineProperties(base.BaseTestCase):

    @SETTINGS
    @hypothesis.given(start=st.sampled_from(sorted(states.ALL)),
                      choices=st.lists(st.integers(min_value=0),
                                       max_size=20))
    def test_every_path_ends_in_a_terminal_status(self, start, choices):
        """Any walk of legal moves ends, within as many moves as there
        are statuses, in a status with no way out but none."""
        status = start
        for step in range(len(states.ALL) + 1):
            moves = sorted(new for new in states.ALL
                           if states.can_transition(status, new))
            if not moves:
                self.assertIn(status, states.TERMINAL)
                return
            status = moves[choices[step % len(choices)] % len(moves)
                           if choices else 0]
        self.fail('a walk from %s never ended' % start)

    @SETTINGS
    @hypothesis.given(old=st.sampled_from(sorted(states.ALL)),
                      new=st.text(max_size=12) | st.sampled_from(
                          sorted(states.ALL)))
    def test_a_move_is_legal_or_a_typed_refusal(self, old, new):
        try:
            states.check_transition('m', old, new)
        except exception.InvalidInput:
            self.assertNotIn(new, states.ALL)
        except exception.InvalidMigrationState as exc:
            self.assertFalse(states.can_transition(old, new))
            self.assertIn(old, exc.message)
        else:
            self.assertTrue(states.can_transition(old, new))

    @SETTINGS
    @hypothesis.given(status=st.sampled_from(sorted(states.IN_PROGRESS)))
    def test_error_is_reachable_from_every_status_in_progress(self, status):
        states.check_transition('m', status, states.ERROR)


class RuleProperties(base.BaseTestCase):

    @SETTINGS
    @hypothesis.given(attachments=st.lists(ATTACHMENT, min_size=1,
                                           max_size=4),
                      multiattach=st.booleans(), power=POWER,
                      others=st.lists(POWER, max_size=4),
                      live=st.booleans())
    def test_a_mode_never_forks_a_shared_volume(self, attachments,
                                                multiattach, power, others,
                                                live):
        instance = {'uuid': 'i', 'host': 'h', 'power_state': power}
        volume = {'id': 'v', 'multiattach': multiattach,
                  'attachments': attachments}
        attached = [instance] + [{'power_state': p} for p in others]
        shared_rw = (len(attachments) > 1
                     and any(a['attach_mode'] == 'rw' for a in attachments))
        all_off = all(i['power_state'] != states.POWER_RUNNING
                      for i in attached)
        try:
            mode = rules.choose_migration_mode(
                instance, volume, attached,
                {'live_volume_migration': live})
        except exception.MultiattachMigrationNotSupported:
            self.assertTrue(shared_rw and not all_off)
            return
        except exception.InstanceMustBeShutOff:
            self.assertFalse(live)
            self.assertEqual(states.POWER_RUNNING, power)
            return
        if mode == states.MODE_LIVE:
            self.assertFalse(shared_rw)
            self.assertTrue(live)
            self.assertEqual(states.POWER_RUNNING, power)
        else:
            self.assertEqual(states.MODE_OFFLINE, mode)
            self.assertTrue(all_off if shared_rw
                            else power != states.POWER_RUNNING)

    @SETTINGS
    @hypothesis.given(status=st.sampled_from(sorted(states.ALL)),
                      same_dst=st.booleans())
    def test_cancel_and_complete_only_from_started(self, status, same_dst):
        migration = {'id': 'm', 'status': status,
                     'dst_attachment_id': 'd' if same_dst else 'other'}
        for check, args, repeat_ok in (
                (rules.check_can_cancel, (),
                 {states.CANCELLING, states.CANCELLED}),
                (rules.check_can_complete, ('d',),
                 states.COMPLETE_REQUESTED if same_dst else set())):
            try:
                send = check(migration, *args)
            except exception.InvalidMigrationState:
                self.assertNotEqual(states.STARTED, status)
                self.assertNotIn(status, repeat_ok)
            else:
                self.assertEqual(status == states.STARTED, send)
                self.assertTrue(status == states.STARTED
                                or status in repeat_ok)

    @SETTINGS
    @hypothesis.given(attachments=st.lists(ATTACHMENT, max_size=4),
                      old_size=st.integers(1, 4), new_size=st.integers(1, 4))
    def test_a_swap_never_forks_a_shared_volume(self, attachments,
                                                old_size, new_size):
        old = {'id': 'old', 'size_mb': old_size, 'attachments': attachments}
        new = {'id': 'new', 'size_mb': new_size, 'attachments': []}
        try:
            rules.check_can_swap(old, new, [])
        except exception.Invalid:
            return
        self.assertFalse(len(attachments) > 1 and any(
            a['attach_mode'] == 'rw' for a in attachments))
        self.assertEqual(old_size, new_size)

    @SETTINGS
    @hypothesis.given(volume_ids=st.lists(st.sampled_from('abc'),
                                          max_size=5))
    def test_a_build_names_each_volume_once(self, volume_ids):
        devices = [{'volume_id': v, 'destination_type': 'volume'}
                   for v in volume_ids]
        try:
            rules.check_block_devices(devices)
        except exception.Invalid as exc:
            self.assertIn('twice', exc.message)
            self.assertNotEqual(len(volume_ids), len(set(volume_ids)))
        else:
            self.assertEqual(len(volume_ids), len(set(volume_ids)))

"""Every refusal of doc/source/design.rst, "Rules", that the conductor
decides."""

from oslotest import base

from volmig import exception
from volmig import states
from volmig.conductor import rules


def _instance(uuid='i-1', power=states.POWER_RUNNING, task=None):
    return {'uuid': uuid, 'host': 'compute-1', 'power_state': power,
            'task_state': task}


def _volume(multiattach=False, modes=()):
    return {'id': 'v-1', 'multiattach': multiattach,
            'attachments': [{'id': 'a-%d' % n, 'instance_uuid': 'i-%d' % n,
                             'attach_mode': mode}
                            for n, mode in enumerate(modes, 1)]}


def _migration(status, dst=None, src='a-1'):
    return {'id': 'm-1', 'status': status, 'src_attachment_id': src,
            'dst_attachment_id': dst, 'instance_uuid': 'i-1'}


LIVE = {'live_volume_migration': True}
OFFLINE_ONLY = {'live_volume_migration': False}


class AttachModeTest(base.BaseTestCase):

    def test_valid_modes(self):
        for mode in ('rw', 'ro'):
            rules.check_attach_mode(mode)

    def test_invalid_value_or_type(self):
        for mode in ('RW', 'wo', '', None, 1, ['ro']):
            exc = self.assertRaises(exception.InvalidAttachMode,
                                    rules.check_attach_mode, mode)
            self.assertEqual(400, exc.code)
            self.assertIn(repr(mode), str(exc))

    def test_attach_mode_on_local_block_device(self):
        exc = self.assertRaises(exception.Invalid, rules.check_block_device,
                                {'destination_type': 'local',
                                 'attach_mode': 'ro'})
        self.assertIn('destination_type=volume', str(exc))

    def test_block_device_mode_checked(self):
        self.assertRaises(exception.InvalidAttachMode,
                          rules.check_block_device,
                          {'destination_type': 'volume',
                           'attach_mode': 'rx'})
        rules.check_block_device({'destination_type': 'volume'})


class AttachRulesTest(base.BaseTestCase):

    def test_multi_create_needs_multiattach(self):
        exc = self.assertRaises(exception.MultiCreateNeedsMultiattach,
                                rules.check_multi_create, 2, [_volume()])
        self.assertEqual(400, exc.code)
        self.assertIn('v-1', str(exc))
        rules.check_multi_create(2, [_volume(multiattach=True)])
        rules.check_multi_create(1, [_volume()])

    def test_non_multiattach_volume_already_attached(self):
        exc = self.assertRaises(exception.MultiattachNotSupported,
                                rules.check_can_attach,
                                _volume(modes=['rw']), [])
        self.assertEqual(400, exc.code)
        self.assertIn('i-1', str(exc))
        rules.check_can_attach(_volume(multiattach=True, modes=['rw']), [])

    def test_attach_held_back_while_migrating(self):
        exc = self.assertRaises(exception.MigrationInProgress,
                                rules.check_can_attach,
                                _volume(multiattach=True, modes=['ro']),
                                [_migration(states.STARTED)])
        self.assertEqual(409, exc.code)

    def test_attach_recorded_meets_a_migration_or_another_mapping(self):
        mappings = [{'instance_uuid': 'i-9'}, {'instance_uuid': 'i-2'}]
        exc = self.assertRaises(
            exception.MultiattachNotSupported, rules.check_attach_recorded,
            _volume(), 'i-9', {'migrations': [], 'mappings': mappings})
        self.assertEqual(400, exc.code)
        self.assertIn('i-2', str(exc))
        exc = self.assertRaises(
            exception.MigrationInProgress, rules.check_attach_recorded,
            _volume(multiattach=True), 'i-9',
            {'migrations': [_migration(states.STARTING)],
             'mappings': mappings[:1]})
        self.assertEqual(409, exc.code)
        rules.check_attach_recorded(_volume(), 'i-9', {
            'migrations': [], 'mappings': mappings[:1]})
        rules.check_attach_recorded(_volume(multiattach=True), 'i-9', {
            'migrations': [], 'mappings': mappings})

    def test_of_two_attaches_to_one_server_the_first_recorded_wins(self):
        mappings = [{'id': 7, 'instance_uuid': 'i-9'},
                    {'id': 8, 'instance_uuid': 'i-9'}]
        check = {'migrations': [], 'mappings': mappings}
        rules.check_attach_recorded(_volume(multiattach=True), 'i-9', check,
                                    7)
        exc = self.assertRaises(
            exception.Invalid, rules.check_attach_recorded,
            _volume(multiattach=True), 'i-9', check, 8)
        self.assertIn('already attached to server i-9', str(exc))

    def test_start_that_missed_a_mapping_gives_way(self):
        volume = _volume(multiattach=True, modes=['ro'])
        exc = self.assertRaises(
            exception.MigrationInProgress, rules.check_attachments_seen,
            volume, [_instance('i-1'), _instance('i-7')])
        self.assertEqual(409, exc.code)
        self.assertIn('i-7', str(exc))
        self.assertNotIn('i-1', str(exc))
        rules.check_attachments_seen(volume, [_instance('i-1')])

    def test_feature_on_old_compute(self):
        exc = self.assertRaises(exception.ComputeTooOld,
                                rules.check_compute_version, 'old-host',
                                'read-only attachments', '1.1', False)
        self.assertEqual(409, exc.code)
        self.assertIn('old-host', str(exc))
        self.assertIn('1.1', str(exc))
        rules.check_compute_version('new-host', 'read-only attachments',
                                    '1.1', True)

    def test_instance_busy(self):
        exc = self.assertRaises(exception.InstanceInvalidState,
                                rules.check_instance_idle,
                                _instance(task=states.TASK_VOLUME_MIGRATING),
                                'stop')
        self.assertEqual(409, exc.code)
        self.assertIn('stop', str(exc))
        rules.check_instance_idle(_instance(), 'stop')


class MigrationModeTest(base.BaseTestCase):

    def test_single_attachment_running_is_live(self):
        self.assertEqual(states.MODE_LIVE, rules.choose_migration_mode(
            _instance(), _volume(modes=['rw']), [_instance()], LIVE))

    def test_shut_off_instance_is_offline(self):
        off = _instance(power=states.POWER_SHUTDOWN)
        for capabilities in (LIVE, OFFLINE_ONLY):
            self.assertEqual(states.MODE_OFFLINE,
                             rules.choose_migration_mode(
                                 off, _volume(modes=['rw']), [off],
                                 capabilities))

    def test_offline_only_driver_with_running_instance(self):
        exc = self.assertRaises(exception.InstanceMustBeShutOff,
                                rules.choose_migration_mode, _instance(),
                                _volume(modes=['rw']), [_instance()],
                                OFFLINE_ONLY)
        self.assertEqual(409, exc.code)

    def test_multiattach_with_a_rw_attachment_refused(self):
        volume = _volume(multiattach=True, modes=['rw', 'ro'])
        attached = [_instance('i-1'),
                    _instance('i-2', power=states.POWER_SHUTDOWN)]
        exc = self.assertRaises(exception.MultiattachMigrationNotSupported,
                                rules.choose_migration_mode, attached[0],
                                volume, attached, LIVE)
        self.assertIn('2 attachments', str(exc))

    def test_multiattach_rw_all_shut_off_is_offline(self):
        volume = _volume(multiattach=True, modes=['rw', 'rw'])
        attached = [_instance('i-1', power=states.POWER_SHUTDOWN),
                    _instance('i-2', power=states.POWER_SHUTDOWN)]
        self.assertEqual(states.MODE_OFFLINE, rules.choose_migration_mode(
            attached[0], volume, attached, LIVE))

    def test_multiattach_all_ro_is_live(self):
        volume = _volume(multiattach=True, modes=['ro', 'ro'])
        attached = [_instance('i-1'), _instance('i-2')]
        self.assertEqual(states.MODE_LIVE, rules.choose_migration_mode(
            attached[0], volume, attached, LIVE))


class OtherMigrationTest(base.BaseTestCase):

    def test_same_volume_in_progress(self):
        exc = self.assertRaises(exception.MigrationInProgress,
                                rules.check_no_other_migration, _instance(),
                                'a-2', _volume(modes=['rw']),
                                [_migration(states.ACCEPTED)])
        self.assertIn(states.ACCEPTED, str(exc))

    def test_same_attachment_of_a_multiattach_volume(self):
        self.assertRaises(exception.MigrationInProgress,
                          rules.check_no_other_migration, _instance(), 'a-1',
                          _volume(multiattach=True, modes=['ro', 'ro']),
                          [_migration(states.STARTING)])

    def test_sibling_attachment_of_a_multiattach_volume(self):
        rules.check_no_other_migration(
            _instance('i-2'), 'a-2',
            _volume(multiattach=True, modes=['ro', 'ro']),
            [_migration(states.STARTED)])

    def test_task_on_the_instance(self):
        exc = self.assertRaises(exception.MigrationInProgress,
                                rules.check_no_other_migration,
                                _instance(task=states.TASK_POWERING_OFF),
                                'a-1', _volume(modes=['rw']), [])
        self.assertIn(states.TASK_POWERING_OFF, str(exc))


class CancelCompleteTest(base.BaseTestCase):

    def test_cancel(self):
        self.assertTrue(rules.check_can_cancel(_migration(states.STARTED)))
        for status in (states.CANCELLING, states.CANCELLED):
            self.assertFalse(rules.check_can_cancel(_migration(status)))
        for status in (states.ACCEPTED, states.STARTING, states.COMPLETING,
                       states.COMPLETED, states.ERROR):
            exc = self.assertRaises(exception.InvalidMigrationState,
                                    rules.check_can_cancel,
                                    _migration(status))
            self.assertIn(status, str(exc))

    def test_complete(self):
        self.assertTrue(rules.check_can_complete(_migration(states.STARTED),
                                                 'd-1'))
        self.assertFalse(rules.check_can_complete(
            _migration(states.COMMITTING, dst='d-1'), 'd-1'))
        for status in (states.ACCEPTED, states.STARTING, states.CANCELLING,
                       states.CANCELLED, states.ERROR):
            self.assertRaises(exception.InvalidMigrationState,
                              rules.check_can_complete, _migration(status),
                              'd-1')

    def test_switch(self):
        self.assertTrue(rules.check_can_switch(_migration(states.COMPLETING)))
        for status in (states.SRC_RELEASED, states.COMMITTING,
                       states.COMPLETED):
            self.assertFalse(rules.check_can_switch(_migration(status)))
        # Failed meanwhile (the stall timeout): its recovery decides.
        exc = self.assertRaises(exception.InvalidMigrationState,
                                rules.check_can_switch,
                                _migration(states.ERROR))
        self.assertIn(states.ERROR, str(exc))

    def test_complete_repeated_with_another_dst(self):
        self.assertRaises(exception.InvalidMigrationState,
                          rules.check_can_complete,
                          _migration(states.COMPLETED, dst='d-1'), 'd-2')

    def test_dst_attachment(self):
        rules.check_dst_attachment(_migration(states.STARTED),
                                   {'id': 'd-1', 'instance_uuid': 'i-1'})
        exc = self.assertRaises(exception.Invalid,
                                rules.check_dst_attachment,
                                _migration(states.STARTED),
                                {'id': 'a-1', 'instance_uuid': 'i-1'})
        self.assertIn('source attachment', str(exc))
        exc = self.assertRaises(exception.Invalid,
                                rules.check_dst_attachment,
                                _migration(states.STARTED),
                                {'id': 'd-1', 'instance_uuid': 'i-9'})
        self.assertIn('i-9', str(exc))

    def test_dst_volume_size(self):
        rules.check_dst_volume(_migration(states.STARTED),
                               {'id': 'v-1', 'size_mb': 16},
                               {'id': 'v-2', 'size_mb': 16})
        exc = self.assertRaises(exception.DestinationMismatch,
                                rules.check_dst_volume,
                                _migration(states.STARTED),
                                {'id': 'v-1', 'size_mb': 16},
                                {'id': 'v-2', 'size_mb': 32})
        self.assertIn('32 MiB', str(exc))
        self.assertEqual(400, exc.code)


class SwapAndMicroversionRulesTest(base.BaseTestCase):

    @staticmethod
    def _sized(volume_id, size_mb, **kwargs):
        return dict(_volume(**kwargs), id=volume_id, size_mb=size_mb)

    def test_swap_of_a_volume_shared_rw_is_refused(self):
        exc = self.assertRaises(
            exception.MultiattachSwapNotSupported, rules.check_can_swap,
            self._sized('old', 16, multiattach=True, modes=['rw', 'ro']),
            self._sized('new', 16), [])
        self.assertEqual(400, exc.code)
        self.assertIn('old', str(exc))

    def test_swap_of_a_volume_shared_ro_is_allowed(self):
        rules.check_can_swap(
            self._sized('old', 16, multiattach=True, modes=['ro', 'ro']),
            self._sized('new', 16), [])

    def test_swap_needs_the_same_size_and_another_volume(self):
        exc = self.assertRaises(exception.Invalid, rules.check_can_swap,
                                self._sized('old', 16, modes=['rw']),
                                self._sized('new', 8), [])
        self.assertIn('8 MiB', str(exc))
        exc = self.assertRaises(exception.Invalid, rules.check_can_swap,
                                self._sized('old', 16, modes=['rw']),
                                self._sized('old', 16), [])
        self.assertIn('the new volume is the old volume', str(exc))

    def test_swap_while_migrating_is_a_conflict(self):
        exc = self.assertRaises(
            exception.MigrationInProgress, rules.check_can_swap,
            self._sized('old', 16, modes=['rw']), self._sized('new', 16),
            [dict(_migration(states.STARTED), volume_id='old')])
        self.assertEqual(409, exc.code)

    def test_multiattach_needs_2_60(self):
        shared = _volume(multiattach=True)
        exc = self.assertRaises(exception.MultiattachNeedsMicroversion,
                                rules.check_multiattach_version, shared,
                                False)
        self.assertIn('2.60', str(exc))
        rules.check_multiattach_version(shared, True)
        rules.check_multiattach_version(_volume(), False)

    def test_multi_create_sharing_needs_2_61(self):
        shared = _volume(multiattach=True)
        exc = self.assertRaises(exception.MultiattachNeedsMicroversion,
                                rules.check_multi_create_version, 2,
                                [shared], False)
        self.assertIn('2.61', str(exc))
        rules.check_multi_create_version(2, [shared], True)
        rules.check_multi_create_version(1, [shared], False)


class PowerReportTest(base.BaseTestCase):

    def test_an_agent_reports_states_volmig_knows(self):
        rules.check_power_report(states.POWER_SHUTDOWN, states.VM_STOPPED)
        rules.check_power_report(states.POWER_RUNNING)
        for power, vm in ((states.POWER_RUNNING, states.VM_DELETED),
                          ('exploded', states.VM_ACTIVE),
                          (states.POWER_RUNNING, None)):
            error = self.assertRaises(exception.InvalidInput,
                                      rules.check_power_report, power, vm)
            self.assertIn(repr(vm), str(error))

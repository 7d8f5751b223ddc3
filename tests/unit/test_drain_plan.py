"""How a drain plans a pool, follows its volumes, and counts progress."""

import datetime

from oslotest import base

from volmig import drains
from volmig.volume_service import drain


def volume(vol_id, pool='pool-a', size_mb=16, attachments=(), **values):
    record = {'id': vol_id, 'name': None, 'pool': pool, 'size_mb': size_mb,
              'migration_source': None, 'migration_status': None,
              'migration_pool': None, 'migration_dst': None,
              'migration_error': None, 'migration_progress': None,
              'attachments': [{'attach_status': status, 'attach_mode': mode}
                              for mode, status in attachments]}
    record.update(values)
    return record


RW, RO = ('rw', 'attached'), ('ro', 'attached')


class ClassifyTest(base.BaseTestCase):

    def action(self, vol, capacity=1024):
        return drain.classify(vol, 'pool-b', capacity)

    def test_how_each_kind_moves(self):
        self.assertEqual('copy', self.action(volume('a'))[0])
        self.assertEqual('copy', self.action(volume(
            'r', attachments=[('rw', 'reserved')]))[0])
        self.assertEqual('live', self.action(volume('s', attachments=[RW]))[0])
        action, reason = self.action(volume('ro', attachments=[RO, RO]))
        self.assertEqual('live', action)
        self.assertIn('read-only to 2 servers', reason)
        action, reason = self.action(volume('rw', attachments=[RW, RO]))
        self.assertEqual('offline', action)
        self.assertIn('once all of them are shut off', reason)

    def test_what_cannot_move_says_why(self):
        cases = [
            (volume('d', migration_source='v1'),
             'destination of the migration of volume v1'),
            (volume('m', migration_status='migrating',
                    migration_pool='pool-c'), 'migrating to pool pool-c'),
            (volume('e', migration_status='error', migration_dst='x',
                    migration_error='a guest may be on dst'),
             'needs an operator: a guest may be on dst'),
            (volume('big', size_mb=2048),
             'its 2048 MiB do not fit pool pool-b (1024 MiB)'),
        ]
        for vol, reason in cases:
            action, why = self.action(vol)
            self.assertEqual('none', action, vol['id'])
            self.assertIn(reason, why)

    def test_a_migration_to_the_target_already_is_followed(self):
        self.assertEqual('copy', self.action(volume(
            'm', migration_status='migrating', migration_pool='pool-b'))[0])

    def test_plan_covers_only_the_pool_and_skips_what_cannot_move(self):
        entries = drain.plan([volume('a'), volume('b', pool='pool-b'),
                              volume('big', size_mb=4096)], 'pool-a',
                             'pool-b', 1024)
        self.assertEqual([('a', 'pending'), ('big', 'skipped')],
                         [(e['volume_id'], e['state']) for e in entries])


class RefreshTest(base.BaseTestCase):

    def entry(self, state):
        return {'volume_id': 'v', 'state': state, 'reason': 'r',
                'size_mb': 16}

    def test_states_follow_the_volume_record(self):
        moved = volume('v', pool='pool-b', migration_status='success')
        self.assertEqual('done', drain.refresh(
            self.entry('migrating'), moved, 'pool-b')['state'])
        under_way = volume('v', migration_status='queued')
        self.assertEqual('migrating', drain.refresh(
            self.entry('pending'), under_way, 'pool-b')['state'])
        failed = drain.refresh(self.entry('migrating'), volume(
            'v', migration_status='error', migration_error='checksum'),
            'pool-b')
        self.assertEqual(('failed', 'checksum'),
                         (failed['state'], failed['reason']))
        # A refused try leaves the volume in error; the entry waits on.
        self.assertEqual('waiting', drain.refresh(
            self.entry('waiting'), volume('v', migration_status='error'),
            'pool-b')['state'])
        self.assertEqual('skipped', drain.refresh(
            self.entry('pending'), None, 'pool-b')['state'])


class ProgressTest(base.BaseTestCase):

    def test_bytes_count_done_and_the_copied_part_of_those_moving(self):
        began = datetime.datetime(2026, 1, 1)
        record = {'status': 'running', 'created_at': began,
                  'finished_at': began + datetime.timedelta(seconds=30),
                  'volumes': [
                      {'volume_id': 'a', 'size_mb': 10, 'state': 'done'},
                      {'volume_id': 'b', 'size_mb': 20,
                       'state': 'migrating'},
                      {'volume_id': 'c', 'size_mb': 10, 'state': 'pending'},
                      {'volume_id': 'd', 'size_mb': 99, 'state': 'skipped'}]}
        result = drains.progress(record, {'b': {'migration_progress': 50.0}})
        mib = 1024 * 1024
        self.assertEqual(40 * mib, result['bytes_total'])
        self.assertEqual(20 * mib, result['bytes_done'])
        self.assertEqual(1, result['volumes_done'])
        self.assertEqual(4, result['volumes_total'])
        # Half the bytes in 30 s: 30 s left.
        self.assertEqual(30.0, result['eta_seconds'])

"""Draining a pool on the qemu driver, with real guests, through REST.

The pool holds every kind of volume: available ones, one attached
read/write to a running guest, one shared read-only by two running
guests, one shared read/write by two guests that are shut off, and one
shared read/write by two running guests. Each must end in the target pool
byte-exact (against the guests' acknowledged writes, or its original
content), except the last, which waits untouched until its servers are
shut off and then moves offline.
"""

import hashlib
import json
import os
import signal

from oslo_utils import timeutils

from tests import notification_samples
from tests.integration import real_guest_base
from volmig.compute.drivers import guests

MIB = 1024 * 1024


def fill(path, size_mb, data_mb):
    """Random data over the first ``data_mb`` MiB; the rest a hole."""
    content = os.urandom(data_mb * MIB)
    with open(path, 'r+b') as handle:
        handle.write(content)
    return hashlib.sha256(
        content + b'\0' * ((size_mb - data_mb) * MIB)).hexdigest()


def sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for chunk in iter(lambda: handle.read(MIB), b''):
            digest.update(chunk)
    return digest.hexdigest()


def most_at_once(intervals):
    """The most intervals open at one instant (an end frees its slot
    before a start at the same instant takes one)."""
    events = sorted([(start, 1) for start, _ in intervals]
                    + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


class DrainTestCase(real_guest_base.RealGuestTestCase):
    COPIES = 2

    def options(self):
        options = super().options()
        options[('storage', 'max_concurrent_copies')] = self.COPIES
        options[('storage', 'drain_interval')] = 0.5
        return options

    def drain(self, body, pool='pool-a'):
        return self.rest('POST', '/os-volume-pools/%s/action' % pool,
                         {'drain': body})

    def drain_status(self, pool='pool-a'):
        code, body = self.rest('GET', '/os-volume-pools/%s' % pool)
        self.assertEqual(200, code, body)
        return body['drain']

    def entries(self, drain):
        return {entry['volume_id']: entry for entry in drain['volumes']}

    def copy_intervals(self, volume_ids):
        intervals = []
        for volume_id in volume_ids:
            volume = self.volumes.get_volume(self.admin, volume_id)
            if volume['migration_copy_started_at']:
                intervals.append(tuple(
                    timeutils.normalize_time(timeutils.parse_isotime(
                        volume[key])) for key in (
                            'migration_copy_started_at',
                            'migration_copy_ended_at')))
        return intervals


class MixedPoolDrainTest(DrainTestCase):

    def options(self):
        options = super().options()
        # The versioned notifications, on this vhost's RabbitMQ.
        options[('oslo_messaging_notifications', 'driver')] = 'messagingv2'
        return options

    def test_drain_of_a_mixed_pool(self):
        small, large = self.volume(size_mb=8), self.volume(size_mb=24)
        original = {small['id']: fill(self.path(small['id']), 8, 8),
                    large['id']: fill(self.path(large['id']), 24, 6)}
        single = self.volume()
        shared_ro = self.volume(multiattach=True)
        original[shared_ro['id']] = fill(self.path(shared_ro['id']), 16, 16)
        shared_on = self.volume(multiattach=True)
        shared_off = self.volume(multiattach=True)

        s1 = self.boot_with([(single, 'rw'), (shared_ro, 'ro'),
                             (shared_on, 'rw')], 'compute-1')
        s2 = self.boot_with([(shared_ro, 'ro'), (shared_on, 'rw')],
                            'compute-2', image='volmig-guest-r1')
        s3 = self.boot_with([(shared_off, 'rw')], 'compute-1')
        s4 = self.boot_with([(shared_off, 'rw')], 'compute-2',
                            image='volmig-guest-r1')
        for server, vol in ((s1, single), (s1, shared_on), (s2, shared_on),
                            (s3, shared_off), (s4, shared_off)):
            self.wait_for_acks(server, vol['id'], 10)
        self.stop(s3)
        self.stop(s4)
        off_acks = [self.acks(s, shared_off['id']) for s in (s3, s4)]
        on_path = self.path(shared_on['id'])
        every = [small, large, single, shared_ro, shared_on, shared_off]

        # The plan touches nothing.
        code, body = self.drain({'to': 'pool-b', 'dry_run': True})
        self.assertEqual(200, code, body)
        plan = self.entries(body['drain'])
        self.assertEqual({vol['id'] for vol in every}, set(plan))
        actions = {vol_id: entry['action'] for vol_id, entry in plan.items()}
        self.assertEqual(
            {small['id']: 'copy', large['id']: 'copy', single['id']: 'live',
             shared_ro['id']: 'live', shared_on['id']: 'offline',
             shared_off['id']: 'offline'}, actions)
        self.assertIn('read-only to 2 servers', plan[shared_ro['id']][
            'reason'])
        self.assertIn('once all of them are shut off',
                      plan[shared_off['id']]['reason'])
        for vol in every:
            status = self.volume_status(vol['id'])
            self.assertEqual('pool-a', status['pool'])
            self.assertIsNone(status['migration_status'])
        code, body = self.rest('GET', '/os-volume-pools/pool-a')
        self.assertEqual(404, code, body)

        code, body = self.drain({'to': 'pool-b', 'max_parallel': 3})
        self.assertEqual(202, code, body)
        self.assertEqual('running', body['drain']['status'])
        code, again = self.drain({'to': 'pool-b'})
        self.assertEqual(409, code, again)
        self.assertIn('is being drained into pool-b',
                      again['conflictingRequest']['message'])

        def settled():
            drain = self.drain_status()
            states = {v: e['state'] for v, e in self.entries(drain).items()}
            waiting = self.entries(drain)[shared_on['id']]
            states.pop(shared_on['id'])
            # Its first try may find a server busy with another volume.
            if (waiting['state'] == 'waiting' and 'shut off' in
                    waiting['reason'] and set(states.values()) == {'done'}):
                return drain
            self.assertNotIn('failed', states.values(), drain)
            return None

        drain = self.wait_until(settled, timeout=300,
                                what='every movable volume to be drained')
        self.assertEqual('running', drain['status'])
        self.assertEqual(5, drain['progress']['volumes_done'])
        waiting = self.entries(drain)[shared_on['id']]
        self.assertIn('it can only be migrated when every attached server '
                      'is shut off', waiting['reason'])

        # The copy cap held, by volmig-volume's own records.
        intervals = self.copy_intervals([vol['id'] for vol in every])
        self.assertEqual(5, len(intervals))
        self.assertLessEqual(most_at_once(intervals), self.COPIES)

        for vol_id, want in original.items():
            path = self.path(vol_id)
            self.assertIn('/pool-b/', path)
            self.assertEqual(want, sha256(path), vol_id)
        shared_off_path = self.path(shared_off['id'])
        self.assertIn('/pool-b/', shared_off_path)
        self.assert_acked_on(shared_off_path, off_acks[0], region=0)
        self.assert_acked_on(shared_off_path, off_acks[1], region=1)

        # Its servers running, the shared read/write volume stayed where
        # it was; shut off, the drain moves it offline.
        self.assertEqual(on_path, self.path(shared_on['id']))
        self.assertEqual(2, len(self.volume_status(shared_on['id'])[
            'attachments']))
        self.stop(s1)
        self.stop(s2)
        single_acks = self.acks(s1, single['id'])
        on_acks = [self.acks(s, shared_on['id']) for s in (s1, s2)]
        self.assert_acked_on(self.path(single['id']), single_acks)
        self.assert_acked_on(on_path, on_acks[0], region=0)
        self.assert_acked_on(on_path, on_acks[1], region=1)
        drain = self.wait_until(
            lambda: (lambda d: d if d['status'] != 'running' else None)(
                self.drain_status()), timeout=120,
            what='the drain to end')
        self.assertEqual('completed', drain['status'])
        self.assertEqual(6, drain['progress']['volumes_done'])
        self.assertEqual(drain['progress']['bytes_total'],
                         drain['progress']['bytes_done'])
        moved = self.path(shared_on['id'])
        self.assertIn('/pool-b/', moved)
        self.assert_acked_on(moved, on_acks[0], region=0)
        self.assert_acked_on(moved, on_acks[1], region=1)
        self.assertEqual([], os.listdir(os.path.join(self.state_path,
                                                     'pool-a')))
        # The pool's drains, as the operator's CLI lists them.
        code, out, err = self.cli('volume', 'pool', 'drain', 'list',
                                  'pool-a', '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual([(drain['id'], 'completed',
                           'completed: 6/6 volumes')],
                         [(listed['ID'], listed['Status'],
                           listed['Progress'].partition(',')[0])
                          for listed in json.loads(out)])
        serial = guests.serial(single['id'])
        self.start(s1)
        self.wait_until(lambda: 'RESUME %s %d' % (serial, max(single_acks))
                        in self.console_log(s1), timeout=120,
                        what='the guest to read its last write from pool-b')
        self.assert_notifications_sent()

    def assert_notifications_sent(self):
        """What the services sent over RabbitMQ through all this: every
        message of its sample's shape, and each kind a drain of live
        volumes makes, from each service."""
        messages = notification_samples.from_broker(self.vhost.url)
        notification_samples.check_shapes(self, messages)
        sent = {(message['event_type'],
                 message['publisher_id'].partition(':')[0])
                for message in messages}
        for expected in (('instance.create.end', 'volmig-compute'),
                         ('volume_migration.start.end', 'volmig-compute'),
                         ('volume_migration.complete.end', 'volmig-compute'),
                         ('volume_migration.update', 'volmig-conductor'),
                         ('volume_pool.drain.start', 'volmig-volume'),
                         ('volume_pool.drain.volume', 'volmig-volume'),
                         ('volume_pool.drain.end', 'volmig-volume')):
            self.assertIn(expected, sent)


class DrainRestartTest(DrainTestCase):
    COPIES = 1

    def options(self):
        # The pools share a file system; without offload the copy takes
        # the O_DIRECT path, as it does between two file systems.
        options = super().options()
        options[('storage', 'copy_offload')] = False
        return options

    def test_volume_service_killed_mid_drain(self):
        volumes = [self.volume(size_mb=24) for _ in range(4)]
        original = {vol['id']: fill(self.path(vol['id']), 24, 24)
                    for vol in volumes}
        # 24 MiB at 8 MiB/s: each copy is under way for 3 s.
        code, body = self.drain({'to': 'pool-b', 'max_parallel': 2,
                                 'max_bandwidth_mbps': 8})
        self.assertEqual(202, code, body)

        def one_done_one_copying():
            states = [e['state'] for e in self.drain_status()['volumes']]
            copying = [v for v in volumes if (self.volumes.get_volume(
                self.admin, v['id'])['migration_progress'] or 0) > 0
                and self.volume_status(v['id'])['migration_status']
                == 'migrating']
            return 'done' in states and copying

        self.wait_until(one_done_one_copying, timeout=120,
                        what='a volume drained and another copying')
        done = [vol['id'] for vol in volumes
                if self.volume_status(vol['id'])['pool'] == 'pool-b']
        first_copies = dict(zip(done, self.copy_intervals(done),
                                strict=True))
        self.cluster.restart('volume', sig=signal.SIGKILL)

        drain = self.wait_until(
            lambda: (lambda d: d if d['status'] != 'running' else None)(
                self.drain_status()), timeout=300,
            what='the drain to end after the restart')
        self.assertEqual('completed', drain['status'])
        self.assertEqual(4, drain['progress']['volumes_done'])
        for vol_id, want in original.items():
            path = self.path(vol_id)
            self.assertIn('/pool-b/', path)
            self.assertEqual(want, sha256(path), vol_id)
        # What was done before the kill was not copied again.
        for vol_id, interval in first_copies.items():
            self.assertEqual([interval], self.copy_intervals([vol_id]))
        # One copy at a time, even across the restart.
        intervals = self.copy_intervals(list(original))
        self.assertEqual(4, len(intervals))
        self.assertEqual(1, most_at_once(intervals))
        # No orphan: pool-b holds the four volumes, pool-a nothing.
        self.assertEqual(sorted(os.path.basename(self.path(v))
                                for v in original),
                         sorted(os.listdir(os.path.join(self.state_path,
                                                        'pool-b'))))
        self.assertEqual([], os.listdir(os.path.join(self.state_path,
                                                     'pool-a')))


class HostCapTest(DrainTestCase):
    """The conductor's per-host cap, on real guests: the second start on
    the host waits as ``queued`` until the first migration ends."""

    def options(self):
        options = super().options()
        options[('compute', 'max_concurrent_volume_migrations')] = 1
        # 16 MiB at 4 MiB/s: the first migration runs for seconds.
        options[('storage', 'max_bandwidth_mbps')] = 4
        return options

    def test_second_migration_on_a_host_is_queued_until_the_first_ends(self):
        first, second = self.volume(), self.volume()
        servers = [self.boot([vol]) for vol in (first, second)]
        for server, vol in zip(servers, (first, second), strict=True):
            self.wait_for_acks(server, vol['id'], 10)
        for vol in (first, second):
            code, body = self.migrate(vol['id'])
            self.assertEqual(202, code, body)
        code, body = self.rest('GET', '/os-volume-migrations?volume_id=%s'
                               % second['id'])
        [held] = body['volume_migrations']
        self.assertEqual('queued', held['status'])
        self.assertIn('host compute-1 is migrating 1 volume(s)',
                      held['queued_reason'])
        for vol in (first, second):
            self.assertEqual('success', self.wait_migrated(
                vol['id'])['migration_status'])
        # From volmig-volume's records: the second copy began only once
        # the first migration had ended, after its copy.
        (_, first_end), (second_start, _) = self.copy_intervals(
            [first['id'], second['id']])
        self.assertLess(first_end, second_start)
        for server, vol in zip(servers, (first, second), strict=True):
            self.stop(server)
            self.assert_acked_on(self.path(vol['id']),
                                 self.acks(server, vol['id']))
            self.assertIn('/pool-b/', self.path(vol['id']))

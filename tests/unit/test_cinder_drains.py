"""The conductor's drain of a Cinder pool, pass by pass, on stand-ins for
Cinder and Nova (the integration test runs the real ones): what it
begins, what it records before each step of an offline move, and how a
failure, a cancel and a restart end."""

import fixtures
import oslo_messaging as messaging
from oslo_messaging.notify import _impl_test

from tests import fixtures as volmig_fixtures
from tests.unit import test_db
from volmig import context as volmig_context
from volmig import drains
from volmig import exception
from volmig import signing
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import cinder_drains
from volmig.conductor import operator_manager
from volmig.conf import CONF
from volmig.db import drains as drains_db
from volmig.db import instances as instances_db
from volmig.db import services as service_db

POOL, TARGET = 'ctl@a#a', 'ctl@b#b'


class FakeCinder:
    """Volumes by id; a migration runs until the test ends it."""

    def __init__(self, volumes):
        self.volumes = {v['id']: v for v in volumes}
        self.deleted_attachments = []
        self.created = []
        self.migrations = []

    def pools(self, ctxt):
        return [POOL, TARGET]

    def list_volumes(self, ctxt):
        return [dict(v) for v in self.volumes.values()]

    def get_volume(self, ctxt, volume_id):
        if volume_id not in self.volumes:
            raise exception.VolumeNotFound(volume_id=volume_id)
        return dict(self.volumes[volume_id])

    def attachment_get(self, ctxt, attachment_id):
        """Where Cinder connects the volume: its file on its pool."""
        [volume] = [v for v in self.volumes.values() if attachment_id in
                    {a['id'] for a in v['attachments']}]
        return {'id': attachment_id, 'connection_info': {'data': {
            'export': volume['host'], 'name': 'volume-%s' % volume['id']}}}

    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        attachment = {'id': 'att-%d' % len(self.created),
                      'instance_uuid': instance_uuid, 'attach_mode': mode}
        self.created.append(attachment)
        self.volumes[volume_id]['attachments'].append(attachment)
        return attachment

    def attachment_update(self, ctxt, attachment_id, connector):
        return dict(self.attachment_get(ctxt, attachment_id),
                    connector=connector)

    def attachment_delete(self, ctxt, attachment_id):
        self.deleted_attachments.append(attachment_id)
        for volume in self.volumes.values():
            volume['attachments'] = [a for a in volume['attachments']
                                     if a['id'] != attachment_id]

    def migrate_volume(self, ctxt, volume_id, pool):
        self.migrations.append(volume_id)
        self.volumes[volume_id]['migration_status'] = 'migrating'

    def end(self, volume_id, moved=True):
        volume = self.volumes[volume_id]
        volume.update(migration_status='success' if moved else 'error',
                      host=TARGET if moved else volume['host'])


def mounted(pool, volume_id):
    return '/mnt/%s/volume-%s' % (pool, volume_id)


class FakeNova:
    """Servers by id; each one's record of a volume follows Cinder to
    TARGET unless ``stale`` names it."""

    def __init__(self, servers):
        self.servers_ = servers
        self.refreshed = []
        self.stale = set()

    def record(self, server_id, volume_id):
        pool = POOL if (server_id, volume_id) in self.stale else TARGET
        return {'data': {'export': pool, 'name': 'volume-%s' % volume_id,
                         'device_path': mounted(pool, volume_id)}}

    def servers(self, ids):
        return {i: self.servers_.get(i) for i in ids}

    def server(self, server_id):
        return self.servers_[server_id]

    def lock(self, server_id, reason):
        self.servers_[server_id].update(locked=True, locked_reason=reason)

    def unlock(self, server_id):
        self.servers_[server_id].update(locked=False, locked_reason=None)

    def connector(self, host):
        return {'host': host}

    def refresh(self, server_id, volume_id, connector):
        self.refreshed.append((server_id, volume_id))


class FakeAgents:
    """The agents' answer of a Nova guest's live disk (as Nova's record
    connected it, unless ``live`` says otherwise), and their hashes of
    volumes (running until ``sums`` has one)."""

    def __init__(self):
        self.live = {}
        # The hashes asked for, and the checksums of those done.
        self.asked = []
        self.sums = {}

    @staticmethod
    def can_send_version(version):
        return True

    def volume_checksum(self, ctxt, host, copy_id, connection_info):
        self.asked.append((host, copy_id, connection_info['data']['export']))

    def volume_copy_status(self, ctxt, host, copy_id):
        if copy_id not in {job for _, job, _ in self.asked}:
            return {'state': 'unknown'}
        if copy_id in self.sums:
            return {'state': 'done', 'checksum': self.sums[copy_id]}
        return {'state': 'running'}

    def nova_disk(self, ctxt, host, server_id, volume_id):
        return self.live.get((server_id, volume_id),
                             mounted(TARGET, volume_id))


def volume(volume_id, *servers):
    return {'id': volume_id, 'name': volume_id, 'size_mb': 1024,
            'host': POOL, 'migration_status': None,
            'attachments': [{'id': 'att-%s-%s' % (volume_id, s),
                             'instance_uuid': s, 'attach_mode': 'rw'}
                            for s in servers]}


def server(status):
    return {'status': status, 'OS-EXT-STS:task_state': None,
            'OS-EXT-SRV-ATTR:host': 'compute-1', 'locked': False,
            'locked_reason': None}


class DrainTestCase(test_db.DatabaseTestCase):
    """A pool of four volumes: a running server's, a stopped server's,
    one shared by both, one attached to nothing."""

    def setUp(self):
        super().setUp()
        self.cinder = FakeCinder([volume('running', 's1'),
                                  volume('stopped', 's2'),
                                  volume('shared', 's1', 's2'),
                                  volume('loose')])
        self.nova = FakeNova({'s1': server('ACTIVE'),
                              's2': server('SHUTOFF')})
        self.agents = FakeAgents()
        self.drains = cinder_drains.CinderDrains(self.cinder, self.agents,
                                                 'ctl', self.nova)

    def entries(self):
        return {e['volume_id']: e for e in
                drains_db.latest(POOL)['volumes']}


class CinderDrainsTest(DrainTestCase):

    def test_the_plan_names_each_path(self):
        plan = self.drains.drain(self.ctxt, POOL, TARGET, dry_run=True)
        self.assertEqual(
            {'running': 'swap', 'stopped': 'offline', 'shared': 'none',
             'loose': 'copy'},
            {e['volume_id']: e['action'] for e in plan['volumes']})
        self.assertIsNone(drains_db.latest(POOL))

    def test_a_volume_beside_a_guest_of_volmig_s_own_is_refused(self):
        # A guest of volmig's own, recorded in its database; Nova knows
        # no server of that id.
        instances_db.instance_create(self.ctxt, {
            'uuid': 'g1', 'name': 'vm', 'host': 'compute-1',
            'vm_state': 'active', 'power_state': 'running'})
        self.cinder.volumes['loose']['attachments'] = [
            {'id': 'att-g1', 'instance_uuid': 'g1', 'attach_mode': 'ro'},
            {'id': 'att-s1', 'instance_uuid': 's1', 'attach_mode': 'ro'}]
        [entry] = [e for e in self.drains.drain(
            self.ctxt, POOL, TARGET, dry_run=True)['volumes']
            if e['volume_id'] == 'loose']
        self.assertEqual(('none', drains.SKIPPED),
                         (entry['action'], entry['state']))
        self.assertIn("volmig's guest g1 as well as to Nova's servers",
                      entry['reason'])

    def test_an_unknown_pool_is_refused(self):
        self.assertRaises(exception.PoolNotFound, self.drains.drain,
                          self.ctxt, POOL, 'ctl@z#z')

    def test_a_pass_begins_what_max_parallel_allows_in_order(self):
        self.drains.drain(self.ctxt, POOL, TARGET, max_parallel=2)
        self.drains.run_once()
        self.assertEqual(['running', 'stopped'], self.cinder.migrations)
        states = {v: e['state'] for v, e in self.entries().items()}
        self.assertEqual({'running': drains.MIGRATING,
                          'stopped': drains.MIGRATING,
                          'shared': drains.SKIPPED,
                          'loose': drains.PENDING}, states)

    def test_an_offline_move_holds_lets_go_then_refreshes_and_releases(self):
        self.cinder.volumes.pop('running')
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.drains.run_once()
        self.assertTrue(self.nova.servers_['s2']['locked'])
        self.assertEqual(['att-stopped-s2'], self.cinder.deleted_attachments)
        self.assertEqual('migrating', self.entries()['stopped']['step'])
        self.drains.run_once()
        self.assertEqual([], self.nova.refreshed)
        self.cinder.end('stopped')
        self.drains.run_once()
        self.assertEqual([('s2', 'stopped')], self.nova.refreshed)
        self.assertFalse(self.nova.servers_['s2']['locked'])
        self.assertEqual(drains.DONE, self.entries()['stopped']['state'])

    def test_a_server_locked_by_someone_else_stays_locked(self):
        self.nova.servers_['s2'].update(locked=True, locked_reason='mine')
        self.cinder.volumes.pop('running')
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.drains.run_once()
        self.cinder.end('stopped')
        self.drains.run_once()
        self.assertEqual('mine', self.nova.servers_['s2']['locked_reason'])

    def test_a_server_started_since_the_plan_takes_nova_s_swap(self):
        self.cinder.volumes.pop('running')
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.nova.servers_['s2']['status'] = 'ACTIVE'
        self.drains.run_once()
        entry = self.entries()['stopped']
        self.assertEqual('swap', entry['action'])
        self.assertFalse(self.nova.servers_['s2']['locked'])
        self.assertEqual([], self.cinder.deleted_attachments)

    def test_a_failed_migration_still_gives_the_servers_their_volume(self):
        self.cinder.volumes.pop('running')
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.drains.run_once()
        self.cinder.end('stopped', moved=False)
        self.drains.run_once()
        entry = self.entries()['stopped']
        self.assertEqual(drains.FAILED, entry['state'])
        self.assertIn('error', entry['reason'])
        self.assertEqual([('s2', 'stopped')], self.nova.refreshed)
        self.assertFalse(self.nova.servers_['s2']['locked'])

    def test_a_refused_begin_after_the_hold_is_followed_to_the_end(self):
        def refuse(ctxt, volume_id, pool):
            raise exception.BlockStorageRefused(action='migrate',
                                                reason='no valid host')
        self.cinder.migrate_volume = refuse
        self.cinder.volumes.pop('running')
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.drains.run_once()
        self.drains.run_once()
        entry = self.entries()['stopped']
        self.assertEqual(drains.FAILED, entry['state'])
        self.assertIn('no valid host', entry['reason'])
        self.assertEqual([('s2', 'stopped')], self.nova.refreshed)
        self.assertFalse(self.nova.servers_['s2']['locked'])

    def test_a_restarted_conductor_takes_up_a_held_move(self):
        # A conductor that died once the hold was recorded, before it let
        # the attachment go: the volume still names its server.
        self.cinder.volumes.pop('running')
        self.drains.drain(self.ctxt, POOL, TARGET)
        drain = drains_db.latest(POOL)
        entries = [dict(e, step='held') if e['volume_id'] == 'stopped'
                   else e for e in drain['volumes']]
        drains_db.update(drain['id'], drains.RUNNING, volumes=entries)
        self.nova.lock('s2', 'volmig drain %s of %s' % (drain['id'], POOL))
        cinder_drains.CinderDrains(self.cinder, self.agents, 'ctl',
                                   self.nova).run_once()
        self.assertEqual(['att-stopped-s2'], self.cinder.deleted_attachments)
        self.assertEqual(['stopped'], self.cinder.migrations)

    def test_cancel_skips_what_has_not_begun_and_ends_once_the_rest_do(
            self):
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.drains.run_once()
        drain = self.drains.cancel(self.ctxt, POOL)
        self.assertEqual(drains.RUNNING, drain['status'])
        self.assertEqual(drains.SKIPPED, self.entries()['loose']['state'])
        self.cinder.end('running')
        self.drains.run_once()
        drain = drains_db.latest(POOL)
        self.assertEqual(drains.CANCELLED, drain['status'])
        self.assertEqual(['running'], self.cinder.migrations)

    def test_a_drain_sends_its_start_each_volume_and_its_end(self):
        CONF.set_override('driver', ['test'],
                          group='oslo_messaging_notifications')
        self.useFixture(volmig_fixtures.RPCFixture())
        _impl_test.reset()
        self.addCleanup(_impl_test.reset)
        self.cinder.volumes.pop('running')
        self.drains = cinder_drains.CinderDrains(self.cinder, self.agents,
                                                 'ctl', self.nova)
        self.drains.drain(self.ctxt, POOL, TARGET, max_parallel=2)
        self.drains.run_once()
        self.cinder.end('stopped')
        self.cinder.end('loose')
        self.drains.run_once()

        def events(phase):
            return [(message['publisher_id'],
                     message['payload']['volmig_object.data'])
                    for _c, message, _p, _r in _impl_test.NOTIFICATIONS
                    if message['event_type'] == 'volume_pool.drain.'
                    + phase]
        [(publisher, start)], [(_, end)] = events('start'), events('end')
        self.assertEqual('volmig-conductor:ctl', publisher)
        self.assertEqual({'pending': 2, 'skipped': 1}, start['volumes'])
        self.assertEqual(('completed', {'done': 2, 'skipped': 1}),
                         (end['status'], end['volumes']))
        steps = {}
        for _, event in events('volume'):
            steps.setdefault(event['volume_id'], []).append(
                (event['old_state'], event['state'],
                 tuple(event['instance_uuids'])))
        # The stopped server's volume names it still once its attachment
        # is gone.
        self.assertEqual({
            'stopped': [(None, 'pending', ('s2',)),
                        ('pending', 'migrating', ('s2',)),
                        ('migrating', 'done', ('s2',))],
            'shared': [(None, 'skipped', ('s1', 's2'))],
            'loose': [(None, 'pending', ()), ('pending', 'migrating', ()),
                      ('migrating', 'done', ())]}, steps)

    def test_only_a_controller_may_ask_for_a_drain(self):
        endpoint = operator_manager.OperatorEndpoint(None, None, self.drains)
        for kind in (signing.COMPUTE, signing.VOLUME, signing.CLIENT):
            ctxt = volmig_context.RequestContext(
                sender=signing.Sender(kind, 'compute-1'))
            for method, kwargs in (
                    ('drain_pool', {'pool': POOL, 'target_pool': TARGET}),
                    ('pool_drain_cancel', {'pool': POOL}),
                    ('pool_drain_get', {'pool': POOL})):
                error = self.assertRaises(
                    messaging.ExpectedException,
                    getattr(endpoint, method), ctxt, **kwargs)
                self.assertIsInstance(error.exc_info[1],
                                      exception.MessageRefused)
        self.assertIsNone(drains_db.latest(POOL))
        self.assertEqual([], self.cinder.migrations)


class SwapCheckTest(DrainTestCase):
    """A volume Cinder moved through Nova's swap is done only once Nova's
    record and the live disk on the compute host follow it."""

    def setUp(self):
        super().setUp()
        for name in ('stopped', 'shared', 'loose'):
            self.cinder.volumes.pop(name)
        service_db.update(self.ctxt, compute_rpcapi.BINARY, 'compute-1',
                          compute_rpcapi.TOPIC, '1.6', {})
        # No time for Cinder and Nova to catch up, but where a test says.
        self.useFixture(fixtures.MonkeyPatch(
            'volmig.conductor.cinder_drains.SWAP_SETTLE_SECONDS', 0))
        self.drains.drain(self.ctxt, POOL, TARGET)
        self.drains.run_once()
        self.cinder.end('running')

    def test_a_server_on_its_moved_volume_is_done(self):
        self.drains.run_once()
        entry = self.entries()['running']
        self.assertEqual(drains.DONE, entry['state'])
        self.assertIn(mounted(TARGET, 'running'), entry['check'])

    def test_a_live_disk_left_on_the_old_backend_fails_the_volume(self):
        self.agents.live[('s1', 'running')] = mounted(POOL, 'running')
        self.drains.run_once()
        entry = self.entries()['running']
        self.assertEqual(drains.FAILED, entry['state'])
        self.assertIn(mounted(POOL, 'running'), entry['reason'])
        self.assertIn('server s1', entry['reason'])

    def test_a_stale_nova_record_fails_the_volume(self):
        self.nova.stale.add(('s1', 'running'))
        self.drains.run_once()
        entry = self.entries()['running']
        self.assertEqual(drains.FAILED, entry['state'])
        self.assertIn("Nova's record differs", entry['reason'])
        self.assertIn('export', entry['reason'])

    def test_a_host_without_an_agent_is_said_unchecked(self):
        service_db.delete(self.ctxt, compute_rpcapi.BINARY, 'compute-1')
        self.agents.live[('s1', 'running')] = mounted(POOL, 'running')
        self.drains.run_once()
        entry = self.entries()['running']
        self.assertEqual(drains.DONE, entry['state'])
        self.assertIn('not checked', entry['check'])

    def test_a_record_that_catches_up_is_waited_for(self):
        self.useFixture(fixtures.MonkeyPatch(
            'volmig.conductor.cinder_drains.SWAP_SETTLE_SECONDS', 3600))
        self.nova.stale.add(('s1', 'running'))
        self.drains.run_once()
        self.assertEqual(drains.MIGRATING,
                         self.entries()['running']['state'])
        self.nova.stale.clear()
        self.drains.run_once()
        self.assertEqual(drains.DONE, self.entries()['running']['state'])


class HashTestCase(DrainTestCase):
    """A drain of the volume ``KEEP`` alone, begun, with an agent up;
    ``before`` and ``after`` name its hashes."""

    KEEP = ''

    def setUp(self):
        super().setUp()
        for name in set(self.cinder.volumes) - {self.KEEP}:
            self.cinder.volumes.pop(name)
        service_db.update(self.ctxt, compute_rpcapi.BINARY, 'compute-1',
                          compute_rpcapi.TOPIC, '1.6', {})
        drain = self.drains.drain(self.ctxt, POOL, TARGET)
        self.before, self.after = ('%s-%s-%s' % (drain['id'], self.KEEP,
                                                 step)
                                   for step in ('hashing', 'checking'))
        self.drains.run_once()


class CopyCheckTest(HashTestCase):
    """A detached volume is hashed by an agent before Cinder's migration
    and after it, each time through an attachment of its own."""

    KEEP = 'loose'

    def test_the_same_bytes_after_cinder_s_copy_end_it_done(self):
        self.assertEqual([('compute-1', self.before, POOL)],
                         self.agents.asked)
        [attachment] = self.cinder.created
        self.assertEqual((None, 'ro'), (attachment['instance_uuid'],
                                        attachment['attach_mode']))
        self.drains.run_once()
        self.assertEqual([], self.cinder.migrations)
        self.agents.sums[self.before] = 'abc'
        self.drains.run_once()
        # Detached again before Cinder migrates it.
        self.assertEqual(['att-0'], self.cinder.deleted_attachments)
        self.assertEqual(['loose'], self.cinder.migrations)
        self.cinder.end('loose')
        self.drains.run_once()
        self.assertEqual(('compute-1', self.after, TARGET),
                         self.agents.asked[-1])
        self.assertEqual(drains.MIGRATING, self.entries()['loose']['state'])
        self.agents.sums[self.after] = 'abc'
        self.drains.run_once()
        entry = self.entries()['loose']
        self.assertEqual(drains.DONE, entry['state'])
        self.assertIn('sha256 abc', entry['check'])
        self.assertEqual(['att-0', 'att-1'], self.cinder.deleted_attachments)

    def test_other_bytes_after_cinder_s_copy_fail_it(self):
        self.agents.sums[self.before] = 'abc'
        self.drains.run_once()
        self.cinder.end('loose')
        self.drains.run_once()
        self.agents.sums[self.after] = 'abd'
        self.drains.run_once()
        entry = self.entries()['loose']
        self.assertEqual(drains.FAILED, entry['state'])
        self.assertIn('sha256 abc before, abd after', entry['reason'])

    def test_an_agent_that_forgot_its_hash_is_asked_again(self):
        self.agents.asked.clear()
        self.drains.run_once()
        self.assertEqual([('compute-1', self.before, POOL)],
                         self.agents.asked)

    def test_an_agent_gone_has_its_hash_taken_by_another(self):
        service_db.update(self.ctxt, compute_rpcapi.BINARY, 'compute-2',
                          compute_rpcapi.TOPIC, '1.6', {})
        service_db.delete(self.ctxt, compute_rpcapi.BINARY, 'compute-1')
        self.drains.run_once()
        self.assertEqual(('compute-2', self.before, POOL),
                         self.agents.asked[-1])
        self.assertEqual('compute-2', self.entries()['loose']['job']['host'])

    def test_a_volume_attached_meanwhile_is_planned_again(self):
        self.cinder.volumes['loose']['attachments'].append(
            {'id': 'att-late', 'instance_uuid': 's1', 'attach_mode': 'rw'})
        self.agents.sums[self.before] = 'abc'
        self.drains.run_once()
        entry = self.entries()['loose']
        # Planned again at this pass, and begun on the path it has now: a
        # running server's, through Nova's swap, with no hash to match.
        self.assertEqual(('swap', drains.MIGRATING, None), (
            entry['action'], entry['state'], entry['checksum']))
        self.assertEqual(['loose'], self.cinder.migrations)


class OfflineCheckTest(HashTestCase):
    """An offline move's volume is hashed once let go and again after
    Cinder's migration, before its servers get it back."""

    KEEP = 'stopped'

    def test_hashed_before_and_after_then_given_back(self):
        self.assertEqual(['att-stopped-s2'],
                         self.cinder.deleted_attachments)
        self.assertTrue(self.nova.servers_['s2']['locked'])
        self.agents.sums[self.before] = 'abc'
        self.drains.run_once()
        self.assertEqual(['stopped'], self.cinder.migrations)
        self.cinder.end('stopped')
        self.drains.run_once()
        # Hashed while still detached: not refreshed yet.
        self.assertEqual(self.after, self.agents.asked[-1][1])
        self.assertEqual([], self.nova.refreshed)
        self.agents.sums[self.after] = 'abc'
        self.drains.run_once()
        self.assertEqual([('s2', 'stopped')], self.nova.refreshed)
        self.assertFalse(self.nova.servers_['s2']['locked'])
        self.assertEqual(drains.DONE, self.entries()['stopped']['state'])

    def test_a_failed_hash_still_gives_the_server_its_volume(self):
        self.agents.volume_copy_status = lambda *a: {
            'state': 'failed', 'error': 'no such file'}
        self.drains.run_once()
        entry = self.entries()['stopped']
        self.assertEqual(drains.FAILED, entry['state'])
        self.assertIn('not hashed before the move: ', entry['reason'])
        self.assertIn('no such file', entry['reason'])
        self.assertEqual([], self.cinder.migrations)
        self.assertEqual([('s2', 'stopped')], self.nova.refreshed)
        self.assertFalse(self.nova.servers_['s2']['locked'])

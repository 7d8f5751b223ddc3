"""volmig-volume's move of an attached volume between pools, without
RabbitMQ: real files in two pool directories, the block-storage client
calling volmig-api's manager in this process (tests/unit/in_process.py),
the fake driver's guest. The bytes are checked, not only the statuses."""

import contextlib
import os
import threading
import time

import fixtures
import oslo_messaging as messaging

from tests.unit import in_process
from tests.unit import test_migration_conductor
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.block_storage import base
from volmig.cmd import manage
from volmig.conf import CONF
from volmig.datapath import pacing
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.volume_service import manager as storage_manager
from volmig.volume_service import pool_moves as move

SIZE_MB = 4


class _FileAdapter(storage_manager.FileVolumes, base.VolumeAdapter):
    """volmig-volume's records, as the conductor's block-storage adapter:
    the conductor here calls them in this process."""


class MoverBase(test_migration_conductor.ConductorTestBase):
    """Two pools of real files, a volume in pool-a attached to the fake
    driver's guest, and a mover."""

    def make_volumes(self):
        self.pools = {name: self.useFixture(fixtures.TempDir()).path
                      for name in ('pool-a', 'pool-b')}
        CONF.set_override('pools', self.pools, 'storage')
        return _FileAdapter()

    def make_volume(self):
        volume = self.volumes.create_file_volume(
            self.ctxt, SIZE_MB, 'pool-a', self.pools['pool-a'])
        self.data = os.urandom(SIZE_MB * 1024 * 1024)
        with open(volume['path'], 'r+b') as src:
            src.write(self.data)
        return volume

    def setUp(self):
        super().setUp()
        self.deployment = deployment = in_process.Deployment(
            self, self.conductor)
        self.driver = deployment.driver
        self.bdm = instances_db.bdm_get_by_attachment(self.ctxt,
                                                      self.src['id'])
        self.driver.spawn({'uuid': self.instance['uuid']}, [self.bdm])
        self.mover = move.Mover(self.volumes, CONF, deployment.client())
        self.addCleanup(self.mover.stop)
        self.service = volmig_context.get_service_context()

    def volume(self):
        return self.volumes.get_volume(self.ctxt, self.bdm['volume_id'])

    def wait_for(self, status):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            volume = self.volume()
            if volume['migration_status'] == status:
                return volume
            time.sleep(0.02)
        self.fail('the move never became %s: %s' % (status, volume))

    def pool_files(self, pool):
        return sorted(os.listdir(self.pools[pool]))

    def wait_for_src_dropped(self) -> None:
        """The mover deletes src just after it records the success (a
        mover stopped in between leaves ``migration_src_path`` for its
        recovery)."""
        deadline = time.monotonic() + 60
        while self.volume()['migration_src_path']:
            if time.monotonic() > deadline:
                self.fail('src was never dropped: %s' % self.volume())
            time.sleep(0.02)

    def wait_for_the_commit(self) -> None:
        """The move ends once src may go; the commit into dst goes on as
        the migration's job, and ends the migration."""
        [record] = db.migration_get_all(self.ctxt)
        self.mover.patient.wait_for(self.ctxt, record['id'],
                                    states.COMPLETED, timeout=60)


class MoverTest(MoverBase):

    def test_a_move_keeps_every_byte_and_switches_the_guest(self):
        src_path = self.volume()['path']
        self.mover.begin(self.service, self.bdm['volume_id'], 'pool-b')
        moved = self.wait_for('success')
        self.wait_for_src_dropped()
        self.assertEqual('pool-b', moved['pool'])
        self.assertTrue(moved['path'].startswith(self.pools['pool-b']))
        with open(moved['path'], 'rb') as dst:
            self.assertEqual(self.data, dst.read())
        self.assertFalse(os.path.exists(src_path))
        self.assertEqual([], self.pool_files('pool-a'))
        # The guest and the mapping are on the volume's one attachment,
        # which is dst's now.
        [attachment] = moved['attachments']
        disk = self.driver.guest_disk(self.instance['uuid'], moved['id'])
        self.assertEqual((attachment['id'], False),
                         (disk.attachment_id, disk.on_overlay))
        self.assertEqual(attachment['id'], instances_db.bdm_get_by_volume(
            self.ctxt, self.instance['uuid'], moved['id'])['attachment_id'])
        self.wait_for_the_commit()

    def test_the_complete_holds_the_copies_on_the_volume_s_disks(self):
        """A drain's other copies wait while a guest switches, so its
        I/O, held for the switch, is not queued behind theirs."""
        src_path = self.volume()['path']
        held: list = []

        @contextlib.contextmanager
        def first(paths, adaptive):
            held.append((paths, adaptive))
            yield
            held.append('released')
        self.useFixture(fixtures.MockPatchObject(pacing, 'first', first))
        complete = self.mover.patient.complete

        def completing(*args, **kwargs):
            held.append('complete')
            return complete(*args, **kwargs)
        self.useFixture(fixtures.MockPatchObject(
            self.mover.patient, 'complete', completing))
        wait_for = self.mover.patient.wait_for

        def waiting(*args, **kwargs):
            held.append(('wait', kwargs.get('poll_intervals')))
            return wait_for(*args, **kwargs)
        self.useFixture(fixtures.MockPatchObject(
            self.mover.patient, 'wait_for', waiting))
        self.mover.begin(self.service, self.bdm['volume_id'], 'pool-b')
        moved = self.wait_for('success')
        # The wait for the guest's switch is inside the hold, and asks
        # often at first: each ask's delay holds the other copies too.
        self.assertEqual([([src_path, moved['path']], True), 'complete',
                          ('wait', move.SWITCH_POLLS), 'released'],
                         [step for step in held if step != ('wait', None)])
        self.wait_for_the_commit()

    def test_a_refused_start_leaves_the_volume_whole_on_src(self):
        # The guest is gone from the agent: it refuses the start.
        self.driver.destroy({'uuid': self.instance['uuid']})
        self.assertRaises(exception.InstanceNotFound, self.mover.begin,
                          self.service, self.bdm['volume_id'], 'pool-b')
        volume = self.wait_for('error')
        self.assertEqual(('pool-a', None),
                         (volume['pool'], volume['migration_dst']))
        self.assertIn('could not be found', volume['migration_error'])
        self.assertEqual([], self.pool_files('pool-b'))
        with open(volume['path'], 'rb') as src:
            self.assertEqual(self.data, src.read())

    def test_a_second_move_of_the_same_volume_is_refused(self):
        self.mover.begin(self.service, self.bdm['volume_id'], 'pool-b')
        error = self.assertRaises(
            exception.MigrationInProgress, self.mover.begin,
            self.service, self.bdm['volume_id'], 'pool-b')
        self.assertIn('already migrating to pool pool-b', error.message)
        self.wait_for('success')

    def test_a_copy_whose_migration_is_cancelled_stops(self):
        """A cancel from elsewhere (an operator's abort) while volmig-volume
        copies: the copy stops at its next check, rather than running to
        its end for a complete that cannot come, and src stays whole."""
        self.useFixture(fixtures.MonkeyPatch(
            'volmig.volume_service.pool_moves.STILL_STARTED_INTERVAL', 0))
        CONF.set_override('copy_chunk_kb', 64, 'storage')
        # 4 MiB at 1 MiB/s: four seconds of copy, of which a progress
        # record (half a second) after the cancel is needed.
        self.mover.begin(self.service, self.bdm['volume_id'], 'pool-b',
                         max_bandwidth_mbps=1)
        deadline = time.monotonic() + 60
        while not self.volume()['migration_progress']:
            self.assertLess(time.monotonic(), deadline, self.volume())
            time.sleep(0.02)
        self.mover.client.cancel(self.ctxt, self.src['id'])
        volume = self.wait_for('error')
        # Whichever the copy's next check saw: the cancel under way, or
        # over.
        self.assertRegex(volume['migration_error'],
                         'cancell(ing|ed), so its copy stopped')
        self.assertLess(volume['migration_progress'], 100)
        self.assertEqual(('pool-a', None),
                         (volume['pool'], volume['migration_dst']))
        self.assertEqual([], self.pool_files('pool-b'))
        with open(volume['path'], 'rb') as src:
            self.assertEqual(self.data, src.read())

    def test_answers_lost_after_the_complete_are_asked_again(self):
        """volmig-api serves the complete, then its answer and the next
        answers are lost, as while it or its conductor restarts."""
        self.useFixture(fixtures.MonkeyPatch('volmig.rpc.ASK_AGAIN_FIRST',
                                             0.01))
        api = self.deployment.api
        complete, get = api.migration_complete, api.migration_get
        lost = {'complete': 0, 'get': 0}

        def complete_then_lost(ctxt, **kwargs):
            answer = complete(ctxt, **kwargs)
            if lost['complete']:
                return answer
            lost['complete'] += 1
            raise messaging.MessagingTimeout('no answer')

        def get_lost_thrice(ctxt, **kwargs):
            if lost['complete'] and lost['get'] < 3:
                lost['get'] += 1
                raise exception.ServiceTimeout(method='migration_get')
            return get(ctxt, **kwargs)
        api.migration_complete = complete_then_lost
        api.migration_get = get_lost_thrice

        self.mover.begin(self.service, self.bdm['volume_id'], 'pool-b')
        moved = self.wait_for('success')
        self.wait_for_src_dropped()
        # The complete was served and asked again; then three polls lost.
        self.assertEqual({'complete': 1, 'get': 3}, lost)
        with open(moved['path'], 'rb') as dst:
            self.assertEqual(self.data, dst.read())
        self.assertEqual([], self.pool_files('pool-a'))
        self.wait_for_the_commit()

    def test_a_start_whose_answer_is_lost_is_cancelled_not_assumed(self):
        """volmig-api served the start, and its answer was lost; then the
        list the roll-back asks for is lost twice. The mover asks again
        and cancels what started, through the conductor."""
        self.useFixture(fixtures.MonkeyPatch('volmig.rpc.ASK_AGAIN_FIRST',
                                             0.01))
        api = self.deployment.api
        start, listing = api.migration_start, api.migration_list
        lost = []

        def start_then_lost(ctxt, **kwargs):
            start(ctxt, **kwargs)
            raise messaging.MessagingTimeout('no answer')

        def list_lost_twice(ctxt, **kwargs):
            if len(lost) < 2:
                lost.append(kwargs)
                raise messaging.MessagingTimeout('no answer')
            return listing(ctxt, **kwargs)
        api.migration_start = start_then_lost
        api.migration_list = list_lost_twice

        self.assertRaises(messaging.MessagingTimeout, self.mover.begin,
                          self.service, self.bdm['volume_id'], 'pool-b')
        volume = self.wait_for('error')
        self.assertEqual(2, len(lost))
        [record] = db.migration_get_all(self.ctxt)
        self.assertEqual(states.CANCELLED, record['status'])
        self.assertEqual(('pool-a', None),
                         (volume['pool'], volume['migration_dst']))
        self.assertEqual([], self.pool_files('pool-b'))
        self.assertFalse(self.driver.guest_disk(
            self.instance['uuid'], volume['id']).on_overlay)

    def failed_at_the_switch(self, switches: bool) -> dict:
        """A move whose migration fails as its guest switches (or not)
        (the conductor's stall timeout, its agent away): both volumes are
        kept, for nobody knows yet where the guest is."""
        switch = self.driver.migration_switch
        failed = threading.Event()

        def switch_once_failed(*args):
            failed.wait(60)
            if not switches:
                raise exception.DriverError(action='switch', reason='test')
            return switch(*args)
        self.driver.migration_switch = switch_once_failed
        self.mover.begin(self.service, self.bdm['volume_id'], 'pool-b')
        [migration] = self.mover.patient.list(self.ctxt)
        self.mover.patient.wait_for(self.ctxt, migration['id'],
                                    states.COMPLETING)
        self.conductor.fail(self.ctxt, migration['id'], 'stalled', True)
        failed.set()
        volume = self.wait_for('error')
        self.assertIn('a guest may be on dst', volume['migration_error'])
        self.assertEqual(1, len(self.pool_files('pool-b')))
        return migration

    def test_a_failed_move_whose_guest_is_on_dst_is_settled_on_dst(self):
        migration = self.failed_at_the_switch(switches=True)
        # Not recovered yet: nobody knows where the guest is.
        self.mover.settle_failed()
        self.assertIn('error, unsettled (dst ',
                      manage.migration_of(self.volume()))
        self.conductor.recovered(self.ctxt, migration['id'], 'dst')
        self.mover.settle_failed()
        moved = self.volume()
        self.assertEqual(('success', 'pool-b', None),
                         (moved['migration_status'], moved['pool'],
                          moved['migration_src_path']))
        self.assertEqual('success', manage.migration_of(moved))
        with open(moved['path'], 'rb') as dst:
            self.assertEqual(self.data, dst.read())
        self.assertEqual([], self.pool_files('pool-a'))
        [attachment] = moved['attachments']
        self.assertEqual(attachment['id'], instances_db.bdm_get_by_volume(
            self.ctxt, self.instance['uuid'], moved['id'])['attachment_id'])

    def test_a_failed_move_whose_guest_is_back_on_src_drops_dst(self):
        migration = self.failed_at_the_switch(switches=False)
        self.conductor.recovered(self.ctxt, migration['id'], 'src')
        self.mover.settle_failed()
        volume = self.volume()
        self.assertEqual(('error', 'pool-a', None),
                         (volume['migration_status'], volume['pool'],
                          volume['migration_dst']))
        self.assertIn('every guest is back on src',
                      volume['migration_error'])
        self.assertEqual([], self.pool_files('pool-b'))
        with open(volume['path'], 'rb') as src:
            self.assertEqual(self.data, src.read())

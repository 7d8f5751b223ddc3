"""The libvirt driver's agent SIGKILLed at every step its journal records,
and libvirtd SIGKILLed in the middle of a block job.

One real guest writes throughout, and its volume goes through one
migration per step: the agent runs under ``crash_at``, which kills it the
moment its journal records that step of start, cancel or complete; the
guest keeps writing while no agent runs; then the real agent starts again
and settles the disk from libvirt's live XML and block jobs. Last,
libvirtd dies as the commit is about to pivot, and comes back; and the
guest's read-only disk moves with the agent killed before its switch's
copy and as it is about to pivot onto its new front. After each
migration nothing is left over: no overlay, no stale front and no journal
entry. At the
end the guest is shut down from outside volmig, which only libvirt's
event tells the agent; it stops cleanly, and its volume holds every
write it acknowledged, byte for byte.

One guest for all the steps, not a test per step as for the qemu driver:
a libvirt guest and its services take about 20 s to set up, and the
steps are what differs.
"""

import glob
import itertools
import os

from tests import libvirt_daemon
from tests.integration import test_libvirt
from tests.integration import test_real_guests
from volmig import exception
from volmig import states

CANCEL_STEPS = ('commit', 'job_complete', 'drop_overlay')
COMPLETE_STEPS = ('switch', 'pivot', 'commit', 'job_complete',
                  'drop_overlay')


class LibvirtRecoveryTest(test_libvirt.LibvirtGuestTestCase):
    KILLS_LIBVIRTD = True
    attachment_id = test_real_guests.LiveDataPath.attachment_id

    def options(self):
        options = super().options()
        # A start whose agent dies must fail in a test's time. (The test
        # process's own calls wait as long: 30 s made its call time out
        # as the API's did, before the API could answer.)
        options[('DEFAULT', 'rpc_response_timeout')] = 15
        # The agent is away for a while at each step (the guest writes on,
        # then the agent starts: 40 s on a loaded CI machine); the
        # healer, which fails a migration whose agent stays away past
        # this, is not what this test is about.
        options[('conductor', 'migration_stall_timeout')] = 120
        # Power changes reach the agent by libvirt's events alone.
        options[('compute', 'sync_power_state_interval')] = 3600
        return options

    def more_acks(self, server, volume_id, count=10) -> None:
        self.wait_for_acks(server, volume_id,
                           len(self.acks(server, volume_id)) + count)

    def killed_then_back(self, server, volume_id) -> None:
        """The agent died; the guest writes on; the agent comes back."""
        self.cluster.wait_for_death('compute-1')
        self.more_acks(server, volume_id)
        self.cluster.restart('compute-1').wait_ready()

    def wait_completed(self, volume_id) -> None:
        """Until the volume's migration is over: the volume lives on dst
        once the guest switched, and the overlay's commit into it ends
        the migration."""
        [migration_id] = self.volumes.get_volume(
            self.admin, volume_id)['migration_ids']
        self.client.wait_for(self.ctxt, migration_id, states.COMPLETED)

    def moved_through_crash(self, server, writing, volume, step: str,
                            pool: str) -> str:
        """Migrate ``volume`` to ``pool``, the agent killed at ``step`` of
        complete while the guest writes on ``writing``; returns the
        volume's new file."""
        self.crash_agent_at('complete:' + step)
        code, body = self.migrate(volume['id'], pool)
        self.assertEqual(202, code, body)
        self.killed_then_back(server, writing['id'])
        migrated = self.wait_migrated(volume['id'])
        self.assertEqual('success', migrated['migration_status'],
                         'complete:%s: %s' % (
                             step, migrated.get('migration_error')))
        self.wait_completed(volume['id'])
        path = self.path(volume['id'])
        self.assertIn('/%s/' % pool, path)
        return path

    def assert_nothing_left(self, server, step) -> None:
        self.assertEqual([], glob.glob(os.path.join(
            self.guest_dir(server), 'overlay-*')), step)
        self.assertEqual([], os.listdir(os.path.join(
            self.state_path, 'compute-1', 'jobs')), step)

    def test_agent_killed_at_every_step(self):
        vol, read_only = self.volume(), self.volume()
        want = self.fill(read_only)
        server = self.boot_with([(vol, 'rw'), (read_only, 'ro')])
        self.wait_for_acks(server, vol['id'], 20)
        attachment = self.attachment_id(server, vol['id'])

        # Start: killed as it is about to put the overlay on top. The
        # start fails; the guest stays on src.
        self.crash_agent_at('start:snapshot')
        exc = self.assertRaises(exception.ComputeUnavailable,
                                self.client.start, self.ctxt, attachment)
        self.assertNotIn('Traceback', exc.message)
        [migration] = self.client.list(self.ctxt, instance_uuid=server)
        self.killed_then_back(server, vol['id'])

        def rolled_back():
            found = self.client.get(self.ctxt, migration['id'])
            return (found if found['status'] == states.ERROR
                    and not found['recovery_needed'] else None)
        failed = self.wait_until(rolled_back, what='the start rolled back')
        self.assertIn('on src', failed['error_reason'])
        self.assert_nothing_left(server, 'start:snapshot')

        for step in CANCEL_STEPS:
            self.crash_agent_at('cancel:' + step)
            migration = self.client.start(self.ctxt, attachment)
            self.more_acks(server, vol['id'])
            self.client.cancel(self.ctxt, attachment)
            self.killed_then_back(server, vol['id'])
            self.client.wait_for(self.ctxt, migration['id'],
                                 states.CANCELLED)
            self.assert_nothing_left(server, 'cancel:' + step)

        pools = itertools.cycle(('pool-b', 'pool-a'))
        for step, pool in zip(COMPLETE_STEPS, pools, strict=False):
            self.moved_through_crash(server, vol, vol, step, pool)
            self.assert_nothing_left(server, 'complete:' + step)

        # libvirtd SIGKILLed as the commit is about to pivot: QEMU runs
        # on; the agent asks again until a new libvirtd answers.
        self.crash_agent_at('--libvirtd', 'complete:job_complete')
        code, body = self.migrate(vol['id'], 'pool-a')
        self.assertEqual(202, code, body)
        self.wait_until(lambda: not libvirt_daemon.answers(),
                        what='libvirtd to die')
        self.more_acks(server, vol['id'])
        libvirt_daemon.start()
        migrated = self.wait_migrated(vol['id'])
        self.assertEqual('success', migrated['migration_status'],
                         migrated.get('migration_error'))
        self.wait_completed(vol['id'])
        self.assertIn('/pool-a/', self.path(vol['id']))
        self.assert_nothing_left(server, 'libvirtd killed')

        # The read-only disk's switch onto a front backed by dst, killed
        # before the block copy and as it is about to pivot: the copy is
        # abandoned and done again, and the guest reads dst through one
        # front.
        for step, pool in (('switch', 'pool-b'), ('pivot', 'pool-a')):
            dst = self.moved_through_crash(server, vol, read_only, step,
                                           pool)
            fronts = glob.glob(os.path.join(self.guest_dir(server),
                                            'front-*.qcow2'))
            self.assertEqual(1, len(fronts), step)
            self.assertEqual((fronts[0], dst),
                             test_libvirt.live_disk(server, read_only['id']))
            self.assert_nothing_left(server, 'read-only complete:' + step)
        self.assert_still_reading(read_only, want, [server])

        # The guest is shut down from outside volmig, as ``virsh
        # shutdown`` does: with the periodic power sync off, only
        # libvirt's lifecycle event can tell the agent.
        self.more_acks(server, vol['id'], 20)
        import libvirt  # Only where the test is not skipped.
        connection = libvirt.open(libvirt_daemon.URI)
        try:
            connection.lookupByUUIDString(server).shutdown()
        finally:
            connection.close()
        self.wait_for_status(server, 'SHUTOFF')
        self.assertIn('volmig-guest: DONE', self.console_log(server))
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))

"""A conductor restart, or libvirtd's, never strands a volume.

One real guest per driver writes throughout, and its volume, on
volmig-volume, moves between pool-a and pool-b again and again:

- the conductor SIGKILLed as the agent's journal records each step of
  complete, and held down longer than ``rpc_response_timeout`` before it
  starts again: every call to it meanwhile goes unanswered;
- on libvirt, libvirtd SIGKILLed at each step of complete, then started
  again;
- the conductor SIGKILLed at a random moment of a migration, held down a
  random while, ``REPEATS`` times (the seed is in the test's details).

After each: the volume's move and the guest's migration are both
terminal; the move succeeded, for nothing failed for good; the volume's
record names the file the guest's live disk uses (by the inode QEMU has
open, or libvirt's live XML); and that file holds every write the guest
acknowledged. The time from each fault to the terminal state is in the
test's details.
"""

import glob
import itertools
import os
import random
import signal
import time

from testtools import content

from tests import libvirt_daemon
from tests.integration import real_guest_base
from tests.integration import test_libvirt
from volmig import states
from volmig.demo import writes as guest_writes

RPC_TIMEOUT = 6
# Longer than a call waits: each call to the conductor meanwhile is lost.
HOLD = RPC_TIMEOUT + 4


class Restarts:
    """The faults; a driver's class names its journal's steps."""

    # Steps of complete the agent's journal records: the switch, the
    # switch onto dst's file (a pivot, or a reopen), the commit.
    COMPLETE_STEPS: tuple[str, ...] = ()
    # Each a fresh random moment and hold (a new seed every run); six, not
    # ten, keep the CI within its 40 minutes (about 9 s each, twice).
    REPEATS = 6

    def options(self):
        options = super().options()
        options[('DEFAULT', 'rpc_response_timeout')] = RPC_TIMEOUT
        # The deadline of last resort, which must not be what settles
        # these faults: past the test's own wait, so that a fault only
        # it would settle fails the test (one did: a complete cast
        # dropped when its check found the conductor away, 121 s).
        options[('conductor', 'migration_stall_timeout')] = (
            2 * real_guest_base.BOOT_TIMEOUT)
        return options

    def setUp(self):
        super().setUp()
        self.settled: list[str] = []
        self.addDetail('time-to-terminal', content.Content(
            content.UTF8_TEXT, lambda: ['\n'.join(self.settled).encode()]))

    def conductor_back_after(self, hold: float) -> float:
        """The conductor died: it stays down ``hold`` s, then starts
        again; returns when it died, once it consumes again. (Until then
        volmig-api rightly answers a look at the migrations 503, which
        the checks that follow take for a failure.)"""
        self.cluster.wait_for_death('conductor')
        died = time.monotonic()
        time.sleep(hold)
        self.cluster.restart('conductor').wait_ready()
        return died

    def assert_settled(self, fault: str, died: float, server, vol,
                       pool: str) -> None:
        """The move and the guest's migration ended, the move on dst; the
        record names the file the guest uses, which holds every write
        the guest acknowledged."""
        moved = self.wait_migrated(vol['id'])
        self.settled.append('%s: %.1f s' % (fault, time.monotonic() - died))
        self.assertEqual('success', moved['migration_status'],
                         '%s: %s' % (fault, moved.get('migration_error')))
        code, body = self.rest(
            'GET', '/os-volume-migrations?volume_id=%s' % vol['id'])
        self.assertEqual(200, code, body)
        ended = {migration['id']: migration['status']
                 for migration in body['volume_migrations']}
        self.assertEqual({states.COMPLETED}, {
            ended[migration_id] for migration_id in self.volumes.get_volume(
                self.admin, vol['id'])['migration_ids']}, fault)
        path = self.path(vol['id'])
        self.assertIn('/%s/' % pool, path, fault)
        self.assert_guest_uses(server, vol, path, fault)
        # The guest writes on: a slot may hold a newer block than the
        # acknowledgements read a moment before.
        self.assertEqual([], guest_writes.mismatches(
            path, self.acks(server, vol['id']), clean=False), fault)

    def more_acks(self, server, vol, count=10) -> None:
        self.wait_for_acks(server, vol['id'],
                           len(self.acks(server, vol['id'])) + count)

    def test_conductor_and_daemon_restarts_during_migrations(self):
        vol = self.volume()
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 20)
        pools = itertools.cycle(('pool-b', 'pool-a'))

        for step in self.COMPLETE_STEPS:
            pool = next(pools)
            self.crash_agent_at('--process=' + self.pid_file('conductor'),
                                'complete:' + step)
            self.migrate_to(vol, pool)
            died = self.conductor_back_after(HOLD)
            self.assert_settled('conductor down %d s at complete:%s'
                                % (HOLD, step), died, server, vol, pool)
            self.more_acks(server, vol)

        for step in self.daemon_steps():
            pool = next(pools)
            self.crash_agent_at('--libvirtd', 'complete:' + step)
            self.migrate_to(vol, pool)
            self.wait_until(lambda: not libvirt_daemon.answers(),
                            what='libvirtd to die')
            died = time.monotonic()
            self.more_acks(server, vol)
            libvirt_daemon.start()
            self.assert_settled('libvirtd restarted at complete:%s' % step,
                                died, server, vol, pool)

        seed = random.SystemRandom().randrange(2 ** 32)
        self.addDetail('seed', content.text_content(str(seed)))
        rng = random.Random(seed)  # nosec B311: timing, not secrets
        self.cluster.restart('compute-1').wait_ready()
        for repeat in range(self.REPEATS):
            pool = next(pools)
            delay, hold = rng.uniform(0, 4), rng.uniform(0, HOLD)
            self.migrate_to(vol, pool)
            time.sleep(delay)
            self.processes['conductor'].signal(signal.SIGKILL)
            died = self.conductor_back_after(hold)
            self.assert_settled(
                'repeat %d: conductor killed %.1f s in, down %.1f s'
                % (repeat, delay, hold), died, server, vol, pool)

        # Last, a clean check: the guest stopped, every slot exact.
        self.more_acks(server, vol)
        self.stop(server)
        self.assertIn('volmig-guest: DONE', self.console_log(server))
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))

    def daemon_steps(self) -> tuple[str, ...]:
        return ()


class QemuRestartsTest(Restarts, real_guest_base.RealGuestTestCase):
    COMPUTES = 1
    COMPUTE_OPTIONS: dict = {}
    COMPLETE_STEPS = ('switch', 'reopen', 'commit')

    def assert_guest_uses(self, server, vol, path, fault) -> None:
        """QEMU holds the record's file open, and no other volume file
        of the pools, present or deleted."""
        inodes, deleted = self.open_files(server)
        self.assertTrue(self.holds(server, path), fault)
        pool_files = glob.glob(os.path.join(self.state_path, 'pool-*', '*'))
        held = [other for other in pool_files if other != path
                and (lambda found: (found.st_dev, found.st_ino))(
                    os.stat(other)) in inodes]
        self.assertEqual([], held + [name for name in deleted
                                     if '/pool-' in name], fault)


class LibvirtRestartsTest(Restarts, test_libvirt.LibvirtGuestTestCase):
    COMPLETE_STEPS = ('switch', 'pivot', 'commit')
    KILLS_LIBVIRTD = True

    def daemon_steps(self) -> tuple[str, ...]:
        return self.COMPLETE_STEPS

    def assert_guest_uses(self, server, vol, path, fault) -> None:
        """libvirt's live XML: the guest reads the record's file, with
        no overlay left on top."""
        self.assertEqual((path, None),
                         test_libvirt.live_disk(server, vol['id']), fault)

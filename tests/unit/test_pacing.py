"""The copy's pace, decided from series recorded on this machine by
``python -m tests.pacing_recorder``: ``pacing_series.json`` holds, each
20 ms, a probe's 4 KiB read of a 2 GiB volume (ms), the flushes its disk
completed since the probe before, and when, while volmig's unpaced
checked copy of that volume ran alone on the disk (``alone``), beside a
writer acknowledging 4 KiB O_DIRECT writes with fdatasync as fast as it
could (``guest``) or five times a second (``records``), and while the
first writer ran alone (``idle``)."""

import json
import os
import tempfile
import threading
import time

import fixtures
from oslotest import base

from tests import fixtures as fixtures_mod
from volmig.conf import CONF
from volmig.datapath import copy
from volmig.datapath import flushes
from volmig.datapath import pacing

MIB = pacing.MIB


def series(name: str) -> list[tuple[float, bool]]:
    """(seconds a probe took, whether others flushed busily then), as
    the pace saw them."""
    with open(os.path.join(os.path.dirname(__file__),
                           'pacing_series.json')) as handle:
        probes = json.load(handle)[name]
    watch = flushes.Flushes(0)
    found, count = [], 0
    for ms, done, when in probes:
        count += done
        found.append((ms / 1000, watch.seen(when, count)))
    return found


def play(pacer: pacing.Pacer, probes: list[tuple[float, bool]],
         limited: bool = True) -> list[float]:
    """The rate after each decision, the probes 20 ms apart."""
    rates = []
    for n, (latency, others) in enumerate(probes):
        if pacer.observe(latency, n * pacing.PROBE_INTERVAL, limited,
                         others):
            rates.append(pacer.rate)
    return rates


class PacerTest(base.BaseTestCase):

    def test_it_backs_off_while_a_guest_waits_behind_the_copy(self):
        pacer = pacing.Pacer(1024 * MIB)
        rates = play(pacer, series('guest'))
        # The probes waited: the rate ends at a fraction of its start.
        self.assertLess(rates[-1], 1024 * MIB / 2)
        self.assertGreater(pacer.delay, 0)
        self.assertTrue(pacer.others)

    def test_it_recovers_when_the_guest_no_longer_waits(self):
        pacer = pacing.Pacer(1024 * MIB)
        fallen = play(pacer, series('guest'))[-1]
        rates = play(pacer, series('idle'))
        self.assertGreater(rates[-1], 4 * fallen)
        # Each decision on the idle disk raised it.
        self.assertEqual(sorted(rates), rates)

    def test_a_copy_is_not_slowed_by_its_own_queue(self):
        """The probes wait behind the copy's own I/O about as long as
        beside a guest; but nobody else flushed, or only as a database's
        commits of volmig's records do: the rate only grows."""
        for scene in ('alone', 'records'):
            probes = series(scene)
            rates = play(pacing.Pacer(256 * MIB), probes)
            self.assertEqual(sorted(rates), rates, scene)
            self.assertGreater(rates[-1], 256 * MIB, scene)
            # The same waits, had a guest flushed, cut the rate.
            cut = play(pacing.Pacer(256 * MIB),
                       [(latency, True) for latency, _ in probes])
            self.assertLess(cut[-1], 256 * MIB, scene)

    def test_it_never_stops_a_copy(self):
        pacer = pacing.Pacer(pacing.MIN_RATE)
        rates = play(pacer, series('guest') * 5)
        self.assertEqual(pacing.MIN_RATE, min(rates))

    def test_a_rate_that_holds_nothing_back_is_not_raised(self):
        """A copy slower than its rate (a slow disk, a remote one) leaves
        the rate where it is: raised, it would let the copy burst later,
        when a guest may be there."""
        pacer = pacing.Pacer(100 * MIB)
        rates = play(pacer, series('idle') + series('alone'),
                     limited=False)
        self.assertEqual({100 * MIB}, set(rates))

    def test_the_delay_is_over_the_lowest_probe(self):
        pacer = pacing.Pacer(100 * MIB)
        # A slower disk: its base is 5 ms, and 5.5 ms is on target.
        play(pacer, [(0.005, True)] +
             [(0.0055, True)] * (pacing.WINDOW * 4 - 1))
        self.assertAlmostEqual(0.0005, pacer.delay)
        self.assertGreater(pacer.rate, 100 * MIB)

    def test_the_base_forgets_what_is_older_than_its_minutes(self):
        pacer = pacing.Pacer(100 * MIB)
        pacer.observe(0.0001, 0, True)
        for minute in range(1, pacing.BASE_MINUTES + 1):
            pacer.observe(0.004, minute * 60, True)
        self.assertEqual(0.004, pacer.base)


class ShareTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        handle, self.path = tempfile.mkstemp()
        self.addCleanup(os.unlink, self.path)
        os.write(handle, os.urandom(1024 * 1024))
        os.close(handle)

    def test_copies_on_one_disk_split_its_rate(self):
        with pacing.shared(self.path, 0, True) as one:
            rate = one.disk.pacer.rate
            with pacing.shared(self.path, 0, True) as two:
                self.assertIs(one.disk, two.disk)
                self.assertEqual(rate / 2, one.rate())
                self.assertEqual(rate / 2, two.rate())

    def test_the_ceiling_bounds_a_copy_s_share(self):
        with pacing.shared(self.path, 2 * MIB, True) as share:
            self.assertEqual(2 * MIB, share.rate())
            share.disk.pacer.rate = MIB
            self.assertEqual(MIB, share.rate())

    def test_every_pass_of_a_checked_copy_keeps_to_its_disk_s_pace(self):
        """The copy, src's hash beside it and the check all take their
        rate from one share of src's disk, and the copy is still right."""
        self.useFixture(fixtures_mod.ConfFixture()).conf(
            copy_chunk_kb=256, copy_pacing=True, group='storage')
        dst = self.path + '.dst'
        self.addCleanup(os.unlink, dst)
        with open(dst, 'wb') as handle:
            handle.truncate(1024 * 1024)
        shares = []
        real = pacing.Paced.__call__

        def paced(throttle, done):
            shares.append(throttle._share)
            real(throttle, done)
        self.useFixture(fixtures.MockPatchObject(pacing.Paced, '__call__',
                                                 paced))
        digest = copy.checked_copy(self.path, dst, CONF, 'vol-1')
        with open(self.path, 'rb') as src, open(dst, 'rb') as copied:
            self.assertEqual(src.read(), copied.read())
        self.assertEqual(64, len(digest))
        [share] = set(shares)
        self.assertEqual(os.stat(self.path).st_dev, share.disk.device)

    def test_a_probe_that_reaches_no_disk_leaves_the_ceiling_alone(self):
        """A volume of holes gives the probe nothing to read from the
        disk: no wait is measured, and nothing slows the copy."""
        with open(self.path, 'wb') as handle:
            handle.truncate(1024 * 1024)
        with pacing.shared(self.path, 0, True) as share:
            for _ in range(500):
                if share.disk.blind:
                    break
                time.sleep(pacing.PROBE_INTERVAL)
            self.assertEqual(float('inf'), share.rate())
        with pacing.shared(self.path, 2 * MIB, True) as share:
            self.assertEqual(2 * MIB, share.rate())

    def held(self, share: pacing.Share) -> threading.Event:
        """Whether a pass of ``share`` went on: one runs from now on."""
        went_on = threading.Event()
        throttle = share.throttle()
        threading.Thread(target=lambda: (throttle(4096), went_on.set()),
                         daemon=True).start()
        return went_on

    def test_a_complete_holds_the_copies_on_its_disk_until_it_ends(self):
        with pacing.shared(self.path, 0, True) as share:
            with pacing.first([self.path, self.path + '.gone'], True):
                self.assertTrue(share.disk.holding)
                went_on = self.held(share)
                # Held, whatever the rate allows.
                self.assertFalse(went_on.wait(0.5))
            self.assertTrue(went_on.wait(60))
            self.assertFalse(share.disk.holding)

    def test_a_complete_holds_them_for_HOLD_seconds_at_most(self):
        self.useFixture(fixtures.MockPatchObject(pacing, 'HOLD', 0.0))
        with pacing.shared(self.path, 0, True) as share:
            with pacing.first([self.path], True):
                self.assertFalse(share.disk.holding)
                self.assertTrue(self.held(share).wait(60))

    def test_without_pacing_a_complete_holds_nothing(self):
        with pacing.shared(self.path, 0, True) as share:
            with pacing.first([self.path], False):
                self.assertFalse(share.disk.holding)
                self.assertTrue(self.held(share).wait(60))

    def test_without_pacing_the_ceiling_alone(self):
        with pacing.shared(self.path, 3 * MIB, False) as share:
            self.assertIsNone(share.disk)
            self.assertEqual(3 * MIB, share.throttle().rate)

    def test_a_disk_that_counts_no_flushes_is_not_paced(self):
        """On tmpfs, as on an NFS share, nothing here tells the copy's
        waits from anyone else's: the ceiling alone paces it."""
        with tempfile.NamedTemporaryFile(dir='/dev/shm') as volume:
            volume.write(os.urandom(4096))
            volume.flush()
            with pacing.shared(volume.name, 3 * MIB, True) as share:
                self.assertIsNone(share.disk)
                self.assertEqual(3 * MIB, share.rate())


class FlushesTest(base.BaseTestCase):

    def test_a_flush_of_anyone_on_the_disk_is_counted(self):
        handle, path = tempfile.mkstemp(dir='/var/tmp')
        self.addCleanup(os.unlink, path)
        watch = flushes.Flushes(os.fstat(handle).st_dev)
        self.assertTrue(watch.watched)
        before = watch.count()
        os.write(handle, os.urandom(4096))
        os.fsync(handle)
        os.close(handle)
        self.assertGreater(watch.count(), before)

    def test_others_are_busy_when_they_flush_all_along(self):
        def busy(per_second: float, seconds: float = 3) -> list[bool]:
            """Looks every 20 ms at a disk flushed so often."""
            watch = flushes.Flushes(0)
            return [watch.seen(n * 0.02, int(n * 0.02 * per_second))
                    for n in range(int(seconds / 0.02))]
        # Seen in BUSY looks, and as long as it goes on.
        self.assertEqual([False] * flushes.BUSY + [True] * 140, busy(100))
        self.assertTrue(all(busy(flushes.BUSY * 2)[50:]))
        self.assertFalse(any(busy(flushes.BUSY / 2)))

    def test_a_burst_of_commits_is_not_a_guest(self):
        watch = flushes.Flushes(0)
        # Twenty flushes at once, every half second.
        self.assertFalse(any(watch.seen(n * 0.02, 20 * (n // 25))
                             for n in range(250)))

    def test_a_file_system_without_a_block_device_is_not_watched(self):
        watch = flushes.Flushes(os.stat('/dev/shm').st_dev)
        self.assertFalse(watch.watched)
        self.assertIsNone(watch.count())
        self.assertFalse(watch.busy(0))

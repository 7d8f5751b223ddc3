"""How fast a copy goes: as fast as its disk serves it without making
the guests on that disk wait.

Two signals, both read where the copy runs. Whether others are busy on
the disk: whether it completed flushes all along the last second
(``flushes``), since a guest's acknowledged write is flushed while a
copy flushes nothing until its end. How long they wait: every
``PROBE_INTERVAL``, one 4 KiB O_DIRECT read of the data of a volume being
copied, at a random offset, from a thread in the best-effort I/O class,
as a guest's I/O is. Its latency over the lowest seen (the base) is the
wait that a guest's small I/O meets on that disk now. The probe alone
cannot tell that wait from the copy's own queue: a copy on a disk
nobody else used ran 13-34 % slower paced than unpaced. Guests' own
block statistics (QMP's ``query-blockstats``, libvirt's ``blockStats``)
were the other candidate; they were not taken because they only see the
guests of one host and one hypervisor, and the copies of volmig-volume
run where no hypervisor is.

The decision is LEDBAT's (RFC 6817), on a rate: each window of
``WINDOW`` probes, the rate grows when others were not busy, or when
the probes' median delay is under ``TARGET``, and shrinks in proportion as
it is over. All the copies on one disk in a process share one probe
and one rate, split between them, so a drain of many volumes adds up to
the same wait as one copy. The copy's ceiling (``max_bandwidth_mbps``)
still bounds each copy. A disk that counts no flushes (an NFS share,
tmpfs) is not paced: the probe there would only slow the copy down for
its own queue.

While a guest's volume on the disk completes (``first``), its copies
wait: the guest's I/O is held for its switch until the disk has served
what is queued before it, and a drain's other copies would keep that
queue full (``benchmarks.guest_stalls --drain 4``: the complete's
longest wait up to 113 ms with them, 49 ms held).
"""

import collections
import contextlib
import mmap
import os
import random
import statistics
import threading
import time

from oslo_log import log as logging
import psutil

from volmig.datapath import flushes
from volmig.datapath import reading

LOG = logging.getLogger(__name__)

MIB = 1024 * 1024
# Seconds between probes: a guest writing every 20 ms is seen.
PROBE_INTERVAL = 0.02
# Probes per decision: 100 ms, in which the rate moves at most 25 %
# (GAIN up, BACKOFF down).
WINDOW = 5
# The probes' median wait over the base that the copies keep to; the
# base when that is more (a slow disk's reads vary by about their own
# time).
TARGET = 0.001
GAIN = 0.25
# The most one decision takes off the rate.
BACKOFF = 0.25
# The rate a disk's copies start at, and the least they are given,
# bytes/s: a copy always ends.
START_RATE = 256 * MIB
MIN_RATE = 8 * MIB
# The base is the lowest probe of the last BASE_MINUTES minutes.
BASE_MINUTES = 10
# A pass may catch up this much time lost to a slow I/O, no more.
SLACK = 0.1
# Seconds a complete holds its disk's copies at most: one that waits
# (for a conductor, an operator) does not stop the others.
HOLD = 10.0


class Pacer:
    """The decision, from the probes' latencies alone: the rate that
    the copies on one disk may take together."""

    def __init__(self, rate: float | None = None):
        self.rate = float(rate or START_RATE)
        self.delay = 0.0
        # Whether others were busy on the disk in the last window decided.
        self.others = True
        self._window: list[float] = []
        # Whether others were busy on the disk, and whether the rate held
        # a copy back, in this window.
        self._others = self._limited = False
        # (minute, lowest latency in it), oldest first.
        self._bases: collections.deque = collections.deque(
            maxlen=BASE_MINUTES)

    @property
    def base(self) -> float:
        return min(low for _, low in self._bases)

    def observe(self, latency: float, now: float, limited: bool,
                others: bool = True) -> bool:
        """Take one probe's latency, in seconds; ``limited``: whether the
        rate held a copy back since the last decision; ``others``: whether
        others were busy on the disk at this probe (``flushes``). True
        when the rate was decided again."""
        minute = int(now // 60)
        if self._bases and self._bases[-1][0] == minute:
            self._bases[-1] = (minute, min(self._bases[-1][1], latency))
        else:
            self._bases.append((minute, latency))
        self._window.append(latency)
        self._others = self._others or others
        self._limited = self._limited or limited
        if len(self._window) < WINDOW:
            return False
        base = self.base
        self.delay = statistics.median(self._window) - base
        self.others, self._others = self._others, False
        limited, self._limited = self._limited, False
        self._window = []
        target = max(TARGET, base)
        # 1 when the probes wait for nothing, or only for the copies;
        # negative when others wait more than the target, down to a cut
        # of BACKOFF.
        off_target = 1.0 if not self.others else max(
            -BACKOFF / GAIN, (target - self.delay) / target)
        if off_target > 0 and not limited:
            # The copies go slower than the rate already: raising it
            # would let them burst later, when a guest may be there.
            return True
        self.rate = max(MIN_RATE, self.rate * (1 + GAIN * off_target))
        return True


class Disk:
    """The copies on one disk in this process: one probe, one rate."""

    def __init__(self, device: int):
        self.device = device
        self.flushes = flushes.Flushes(device)
        self.pacer = Pacer()
        self._lock = threading.Lock()
        self._copies: list[str] = []
        self._limited = False
        # Completes under way on the disk, which its copies wait for,
        # and when the first of them began.
        self._holds = 0
        self._held_since = 0.0
        self._clear = threading.Condition(self._lock)
        self._probe: threading.Thread | None = None
        # The probe reaches no disk (tmpfs, a volume of holes): there is
        # no wait to measure, and the copies' ceilings alone pace them.
        self.blind = False

    def join(self, path: str) -> None:
        with self._lock:
            self._copies.append(path)
            if self._probe is None:
                self._probe = threading.Thread(
                    target=self._run, name='pacing-%x' % self.device,
                    daemon=True)
                self._probe.start()

    def leave(self, path: str) -> None:
        with self._lock:
            self._copies.remove(path)
            if not self._copies:
                # The next copies' files may reach the disk.
                self.blind = False

    def share(self) -> float:
        """Each copy's part of the rate, bytes/s."""
        if self.blind:
            return float('inf')
        with self._lock:
            return self.pacer.rate / max(1, len(self._copies))

    def held(self) -> None:
        """A copy waited for the rate."""
        self._limited = True

    def hold(self) -> None:
        with self._lock:
            if not self._holds:
                self._held_since = time.monotonic()
            self._holds += 1

    def release(self) -> None:
        with self._lock:
            self._holds -= 1
            self._clear.notify_all()

    @property
    def holding(self) -> bool:
        """Whether a complete under way holds the copies, ``HOLD`` at
        most."""
        return bool(self._holds) and (
            time.monotonic() < self._held_since + HOLD)

    def wait_clear(self) -> None:
        with self._lock:
            while self.holding:
                self._clear.wait(self._held_since + HOLD - time.monotonic())

    def _target(self) -> str | None:
        with self._lock:
            if not self._copies:
                self._probe = None
                return None
            return self._copies[-1]

    def _run(self) -> None:
        # Not the copy's idle class, which the thread would inherit: the
        # probe waits as a guest's I/O does.
        psutil.Process(threading.get_native_id()).ionice(
            psutil.IOPRIO_CLASS_NONE)
        probe = None
        try:
            while True:
                path = self._target()
                if path is None:
                    return
                if probe is None or probe.path != path:
                    if probe:
                        probe.close()
                    probe = Probe(path)
                latency = probe.read()
                others = self.flushes.busy(time.monotonic())
                self.blind = latency is None
                # What a probe meets during a complete is the complete's.
                if latency is not None and not self.holding:
                    self._decide(latency, others)
                time.sleep(PROBE_INTERVAL)
        finally:
            if probe:
                probe.close()

    def _decide(self, latency: float, others: bool) -> None:
        limited, self._limited = self._limited, False
        if self.pacer.observe(latency, time.monotonic(), limited, others):
            LOG.debug('Pace on device %(device)x: %(rate).0f MiB/s for '
                      '%(copies)d copies; probe %(delay).2f ms over a '
                      'base of %(base).2f ms; %(others)s',
                      {'device': self.device,
                       'rate': self.pacer.rate / MIB,
                       'copies': len(self._copies),
                       'delay': self.pacer.delay * 1000,
                       'base': self.pacer.base * 1000,
                       'others': 'others busy' if self.pacer.others
                       else 'nobody else busy'})


class Probe:
    """Random 4 KiB reads of one file's data, from the disk."""

    def __init__(self, path: str):
        self.path = path
        self._buffer = mmap.mmap(-1, reading.ALIGN)
        self._blocks: list[tuple[int, int]] = []
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            self._fd = None
            return
        # src is frozen while it is copied: its extents stay put.
        self._blocks = [
            (start, length // reading.ALIGN) for start, length
            in reading.data_extents(self._fd, os.fstat(self._fd).st_size)
            if length >= reading.ALIGN]

    def read(self) -> float | None:
        """Seconds one read takes; None where none reaches the disk."""
        if self._fd is None or not self._blocks:
            return None
        # Where a guest's I/O may land, not a secret: any PRNG will do.
        start, count = random.choice(self._blocks)  # noqa: S311 # nosec
        block = random.randrange(count)  # noqa: S311 # nosec
        offset = start + block * reading.ALIGN
        began = time.monotonic()
        try:
            os.preadv(self._fd, [self._buffer], offset)
        except OSError:
            return None
        return time.monotonic() - began

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_DISKS: dict[int, Disk] = {}
_DISKS_LOCK = threading.Lock()


def _disk(path: str) -> Disk:
    device = os.stat(path).st_dev
    with _DISKS_LOCK:
        return _DISKS.get(device) or _DISKS.setdefault(device, Disk(device))


class Share:
    """One copy's part of its disk's pace. Each pass over the disk (the
    copy, a hash, the check) takes a throttle of its own from it, each at
    the copy's rate. ``ceiling``: bytes/s, 0 for none."""

    def __init__(self, ceiling: int, disk: Disk | None = None):
        self.ceiling = ceiling
        self.disk = disk

    def rate(self) -> float:
        if self.disk is None:
            return self.ceiling
        share = self.disk.share()
        return min(share, self.ceiling) if self.ceiling else share

    def throttle(self) -> reading.Throttle:
        if self.disk is None:
            return reading.Throttle(self.ceiling)
        return Paced(self)


class Paced(reading.Throttle):
    """A pass kept to its copy's share, which changes as it goes."""

    def __init__(self, share: Share):
        super().__init__(0)
        self._share = share
        self._done = 0
        self._due = time.monotonic()

    def __call__(self, done: int) -> None:
        if self._share.disk is not None:
            self._share.disk.wait_clear()
        now = time.monotonic()
        rate = self._share.rate()
        self._due = max(self._due, now - SLACK) + (done - self._done) / rate
        self._done = done
        if self._due > now:
            if self._share.disk is not None:
                self._share.disk.held()
            time.sleep(self._due - now)


@contextlib.contextmanager
def shared(path: str, ceiling: int, adaptive: bool):
    """The pace of one copy, or hash, of the volume at ``path``:
    ``adaptive`` yields to the guests on its disk, under ``ceiling``;
    otherwise the ceiling alone."""
    if not adaptive:
        yield Share(ceiling)
        return
    disk = _disk(path)
    if not disk.flushes.watched:
        yield Share(ceiling)
        return
    disk.join(path)
    try:
        yield Share(ceiling, disk)
    finally:
        disk.leave(path)


@contextlib.contextmanager
def first(paths: list[str], adaptive: bool):
    """A guest's volume completes: the paced copies on the disks of
    ``paths`` (its src and dst) wait until it has."""
    disks: dict[int, Disk] = {}
    for path in paths if adaptive else ():
        try:
            disk = _disk(path)
        except OSError:
            continue  # gone: no copy of it to hold
        if disk.flushes.watched:
            disks[disk.device] = disk
    for disk in disks.values():
        disk.hold()
    try:
        yield
    finally:
        for disk in disks.values():
            disk.release()

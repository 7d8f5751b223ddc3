"""Whether anyone waits on a disk beside the copies: the flushes the
disk completed, which the kernel counts per block device, as a rate.

A guest whose write must be on the disk before it is acknowledged
flushes it (the fsync behind the write; QEMU with ``cache.direct`` and
libvirt's ``cache='none'`` pass it on to the disk), and so does a
database's commit. A copy issues none until its last ``fdatasync``: a
flush on a disk under copy is somebody's write that waits. The bytes
the disk moved were the other candidate, less this process's own
(``/proc/self/io``); they do not tell: the disk counts an I/O as it
completes and the process as it submits it, and the chunks in flight
between the two (megabytes, measured ±4 MiB a 100 ms window on a copy
alone) hide a guest's whole second of 4 KiB writes.

A rate, not any flush: volmig's own records, on a database that shares
the disk, flush too (each service's heartbeat, each copy's progress
every second), a few times a second in a drain, while a guest that
acknowledges its writes flushes with each. ``BUSY`` is between the two.

A disk that keeps no such count (an NFS share, whose block devices are
on its server; tmpfs) cannot be watched from here, nor can one without a
volatile write cache: the kernel completes a flush to it without
sending, or counting, it.
"""

import collections
import os

# /sys/dev/block/M:m/stat (the kernel's Documentation/block/stat.rst):
# the 16th field, 0-based 15, is the flushes completed.
_FLUSHES = 15
# Flushes a second from which the disk is taken as used by others: a
# guest writing every 50 ms does 20; volmig's own records in a drain of
# four copies about 5 (a progress record a second each, and heartbeats).
BUSY = 10
# Over the last second, or since the watch began if later, but not over
# less than a pace window (100 ms).
SECOND = 1.0
LEAST = 0.1


def _sysfs(device: int) -> str:
    return '/sys/dev/block/%d:%d' % (os.major(device), os.minor(device))


def _caches_writes(sysfs: str) -> bool:
    """Whether the disk (a partition's, its whole disk's) has a volatile
    write cache, which it is sent flushes for."""
    for queue in ('queue', '../queue'):
        try:
            with open(os.path.join(sysfs, queue, 'write_cache')) as mode:
                return mode.read().strip() == 'write back'
        except OSError:
            continue
    return False


class Flushes:
    """How often one block device completed a flush, lately."""

    def __init__(self, device: int):
        sysfs = _sysfs(device)
        self._path = os.path.join(sysfs, 'stat')
        # (monotonic time, flushes completed by then), oldest first.
        self._seen: collections.deque = collections.deque()
        self.watched = _caches_writes(sysfs) and self.count() is not None

    def count(self) -> int | None:
        """The flushes the disk completed since it came up; None where
        it counts none."""
        try:
            with open(self._path) as stat:
                fields = stat.read().split()
        except OSError:
            return None
        if len(fields) <= _FLUSHES:
            # A kernel older than 5.5 counts no flushes.
            return None
        return int(fields[_FLUSHES])

    def busy(self, now: float) -> bool:
        """Whether others flushed ``BUSY`` times a second or more lately;
        False where the disk is not watched."""
        count = self.count() if self.watched else None
        return count is not None and self.seen(now, count)

    def seen(self, now: float, count: int) -> bool:
        """Take the disk's count of flushes at ``now``; whether it rose
        ``BUSY`` times a second or more lately."""
        self._seen.append((now, count))
        while len(self._seen) > 1 and self._seen[1][0] <= now - SECOND:
            self._seen.popleft()
        began, first = self._seen[0]
        span = now - began
        return span >= LEAST and (count - first) / span >= BUSY

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

Spread, not any flush: volmig's own records, on a database that shares
the disk, flush too (each service's heartbeat, each copy's progress
every second), a few at a time, while a guest that acknowledges its
writes flushes with each, all along. So others are busy when flushes
completed in ``BUSY`` of the looks (one a probe, every 20 ms or so) of
the last second: a guest that flushes ten times a second or more, not
a burst of commits.

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
# Looks of the last second that saw a flush, from which the disk is
# taken as used by others: a guest writing every 50 ms flushes in about
# 20 of them; volmig's own records (a heartbeat per service every
# report_interval, a progress record per copy every second) in a few.
BUSY = 10
SECOND = 1.0


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
        self._last: int | None = None
        # When the looks of the last second saw a flush, oldest first.
        self._flushed: collections.deque = collections.deque()
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
        """Whether others flushed in ``BUSY`` looks of the last second, this
        one included; False where the disk is not watched."""
        count = self.count() if self.watched else None
        return count is not None and self.seen(now, count)

    def seen(self, now: float, count: int) -> bool:
        """Take the disk's count of flushes at ``now``; whether it rose in
        ``BUSY`` looks of the last second."""
        if self._last is not None and count > self._last:
            self._flushed.append(now)
        self._last = count
        while self._flushed and self._flushed[0] <= now - SECOND:
            self._flushed.popleft()
        return len(self._flushed) >= BUSY

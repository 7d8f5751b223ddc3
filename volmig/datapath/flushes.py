"""Whether anyone waits on a disk beside the copies: the flushes the
disk completed, which the kernel counts per block device.

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

A disk that keeps no such count (an NFS share, whose block devices are
on its server; tmpfs) cannot be watched from here, nor can one without a
volatile write cache: the kernel completes a flush to it without
sending, or counting, it.
"""

import os

# /sys/dev/block/M:m/stat (the kernel's Documentation/block/stat.rst):
# the 16th field, 0-based 15, is the flushes completed.
_FLUSHES = 15


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
    """The flushes completed on one block device since the last look."""

    def __init__(self, device: int):
        sysfs = _sysfs(device)
        self._path = os.path.join(sysfs, 'stat')
        self._last = self._read() if _caches_writes(sysfs) else None

    @property
    def watched(self) -> bool:
        """Whether the disk counts the flushes sent to it."""
        return self._last is not None

    def _read(self) -> int | None:
        try:
            with open(self._path) as stat:
                fields = stat.read().split()
        except OSError:
            return None
        if len(fields) <= _FLUSHES:
            # A kernel older than 5.5 counts no flushes.
            return None
        return int(fields[_FLUSHES])

    def since(self) -> int:
        """Flushes completed since the last call; 0 where the disk keeps
        no count."""
        now = self._read()
        if now is None or self._last is None:
            return 0
        done, self._last = now - self._last, now
        return done

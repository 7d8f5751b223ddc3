"""dst checked against src byte for byte, from the disk, behind a copy.

The copy hands each chunk of src it reads to ``Behind``, which holds it
until the check has read the same bytes of dst back from the disk
(O_DIRECT, once the copy has put them there) and compared them. src is
read and hashed once, and dst read once and compared: a second hash
would cost as much CPU as the first, and the copy of a volume beside a
busy guest is short of CPU before it is short of disk. Whatever the copy
passed without a chunk (src's holes) must read as zeros in dst.

A few chunks are held at most, so a check that falls behind holds the
copy back instead of filling memory.
"""

import collections
import os
import threading

from volmig import exception
from volmig.datapath import reading

# Chunks of src held for the check at most.
HELD = 4


def _first_difference(one, other) -> int:
    """The first index at which two buffers of a length differ, which
    they do: halving, each step one comparison (memcmp)."""
    low, high = 0, len(one)
    while high - low > 1:
        middle = (low + high) // 2
        if one[low:middle] == other[low:middle]:
            low = middle
        else:
            high = middle
    return low


class Behind:
    """What a check behind a copy needs of it: how far dst is on the
    disk for good, and the chunks of src it has not compared yet.

    The copy moves it on (``advance``), feeds it src as it reads it
    (``data``, ``hole``: a walk's sink), and fails it if the copy fails,
    which stops the check. ``checked``: whether a check reads behind;
    without one, no chunk is held.
    """

    def __init__(self, chunk: int, checked: bool = True):
        self._changed = threading.Condition()
        self._at = 0           # dst is on the disk up to here
        self._read = 0         # src is known up to here
        self._chunks: collections.deque = collections.deque()
        self._held = HELD if checked else 0
        self._failed = False
        self._zeros = bytes(chunk) if checked else b''

    # The copy's side.

    def advance(self, offset: int) -> None:
        with self._changed:
            if offset > self._at:
                self._at = offset
                self._changed.notify_all()

    def fail(self) -> None:
        with self._changed:
            self._failed = True
            self._changed.notify_all()

    def check(self) -> None:
        """Raise if the copy failed: what reads beside it is not wanted."""
        if self._failed:
            raise InterruptedError('the copy failed: no hash or check wanted')

    def data(self, offset: int, data: bytes) -> None:
        """A chunk of src, read; waits while the check is behind."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._chunks) < self._held
                                   or not self._held or self._failed)
            self.check()
            if self._held:
                self._chunks.append((offset, data))
            self._read = offset + len(data)
            self._changed.notify_all()

    def hole(self, start: int, end: int) -> None:
        with self._changed:
            self._read = end
            self._changed.notify_all()

    # The check's side.

    def past(self, offset: int) -> int:
        """Wait until dst is on the disk past ``offset``; how far it is."""
        with self._changed:
            self._changed.wait_for(lambda: self._at > offset or self._failed)
            self.check()
            return self._at

    def abandon(self) -> None:
        """No check reads on: hold nothing more, so the copy goes on."""
        with self._changed:
            self._held = 0
            self._chunks.clear()
            self._changed.notify_all()

    def _known(self, start: int, end: int) -> list:
        """src's chunks over [start, end) once src is read past it."""
        with self._changed:
            self._changed.wait_for(lambda: self._read >= end
                                   or self._failed)
            self.check()
            return [(offset, data) for offset, data in self._chunks
                    if offset < end and offset + len(data) > start]

    def _compared(self, end: int) -> None:
        """dst is compared up to ``end``: src's chunks before it go."""
        with self._changed:
            while self._chunks:
                offset, data = self._chunks[0]
                if offset + len(data) > end:
                    break
                self._chunks.popleft()
            self._changed.notify_all()

    def differs(self, offset: int, dst: bytes | int) -> int | None:
        """Where dst at ``offset`` differs from src, None if nowhere:
        ``dst`` the bytes read there, or the length of a hole of dst,
        which reads as zeros. Slices of bytes, not memoryviews: bytes
        compare with memcmp, memoryviews item by item, 70 times
        slower."""
        end = offset + (len(dst) if isinstance(dst, bytes) else dst)
        try:
            position = offset
            for start, data in self._known(offset, end) + [(end, b'')]:
                low = max(start, offset)
                if isinstance(dst, bytes) and low > position:
                    # Between src's chunks, src is a hole: zeros.
                    wrong = _difference(
                        dst[position - offset:low - offset],
                        self._zeros[:low - position])
                    if wrong is not None:
                        return position + wrong
                high = min(start + len(data), end)
                if high > low:
                    # A slice of all of a bytes is the bytes: no copy.
                    wrong = _difference(
                        data[low - start:high - start],
                        dst[low - offset:high - offset]
                        if isinstance(dst, bytes)
                        else self._zeros[:high - low])
                    if wrong is not None:
                        return low + wrong
                position = max(position, high)
            return None
        finally:
            self._compared(end)


def _difference(one: bytes, other: bytes) -> int | None:
    return None if one == other else _first_difference(one, other)


@reading.background_io()
def compare(path: str, size: int, chunk_size: int, io_size: int,
            throttle: reading.Throttle, behind: Behind, name: str) -> bool:
    """Read dst's first ``size`` bytes back with O_DIRECT behind a copy
    into it, each chunk once it is on the disk, and compare them with
    src. False, with nothing read, where O_DIRECT is refused: the read
    would come from the page cache. Raises CopyMismatch naming ``name``
    at the first byte that differs."""
    chunk, io = reading.sizes(chunk_size, io_size)
    try:
        fd, direct = reading.open_direct(path, os.O_RDONLY, size)
        try:
            if direct:
                reading.walk(fd, size, chunk, [_Comparison(behind, name)],
                             None, None, throttle, io, behind.past)
            return direct
        finally:
            os.close(fd)
    finally:
        behind.abandon()


class _Comparison:
    """A walk's sink over dst: each piece compared with src; the first
    byte that differs ends the walk."""

    def __init__(self, behind: Behind, name: str):
        self.behind = behind
        self.name = name

    def _compare(self, offset: int, dst: bytes | int) -> None:
        wrong = self.behind.differs(offset, dst)
        if wrong is not None:
            raise exception.CopyMismatch(volume_id=self.name,
                                         difference='at byte %d' % wrong)

    def data(self, offset: int, data: bytes) -> None:
        self._compare(offset, data)

    def hole(self, start: int, end: int) -> None:
        self._compare(start, end - start)

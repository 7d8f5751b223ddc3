"""Reading a volume's file in order from the disk, for a copy or its
check: its data read ahead on threads of their own and handed on as it
goes (to be hashed, held or compared), its holes (``SEEK_HOLE``) handed
on as the zeros they read as without being read, in the idle I/O class
and at a capped pace. Behind a copy, only what the copy has put on the
disk is looked at (``check``).
"""

import collections
from collections.abc import Callable
from concurrent import futures
import contextlib
import errno
import hashlib
import mmap
import os
import threading
import time

import psutil

# O_DIRECT transfers must be aligned to the device's logical block.
ALIGN = 4096
# Chunks read ahead of the one being hashed and written.
READ_AHEAD = 2

Progress = Callable[[int, int], None]


def data_extents(fd: int, size: int):
    """(offset, length) of each run of data; the rest are holes."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end - start
        offset = end


class Throttle:

    def __init__(self, max_bytes_per_second: int):
        self.rate = max_bytes_per_second
        self.began = time.monotonic()

    def __call__(self, done: int) -> None:
        if self.rate:
            # Sleep until the average rate is back under the cap.
            ahead = done / self.rate - (time.monotonic() - self.began)
            if ahead > 0:
                time.sleep(ahead)


class Digest:
    """sha256 on a thread of its own, so hashing overlaps the I/O
    (hashlib lets go of the GIL on large buffers). At most two chunks
    wait, in order. A walk's sink: it hashes the walk's data, and its
    holes as the zeros they read as."""

    def __init__(self):
        self._sha = hashlib.sha256()
        self._executor = futures.ThreadPoolExecutor(max_workers=1)
        self._pending: list[futures.Future] = []
        self._zeros = b''

    def data(self, offset: int, data: bytes) -> None:
        if len(self._pending) >= 2:
            self._pending.pop(0).result()
        self._pending.append(self._executor.submit(self._sha.update, data))

    def hole(self, start: int, end: int) -> None:
        self._zeros = self._zeros or bytes(1024 * 1024)
        while start < end:
            step = min(len(self._zeros), end - start)
            self.data(start, self._zeros[:step])
            start += step

    def hexdigest(self) -> str:
        for pending in self._pending:
            pending.result()
        self._executor.shutdown()
        return self._sha.hexdigest()


def sizes(chunk_size: int, io_size: int) -> tuple[int, int]:
    """The chunk, and the largest single I/O within it, aligned."""
    chunk = max(ALIGN, chunk_size // ALIGN * ALIGN)
    return chunk, max(ALIGN, min(io_size or chunk, chunk) // ALIGN * ALIGN)


def open_direct(path: str, flags: int, size: int) -> tuple[int, bool]:
    """O_DIRECT when the file system takes it and the size is aligned."""
    if size % ALIGN == 0:
        try:
            return os.open(path, flags | os.O_DIRECT), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags), False


def _segments(fd: int, size: int, chunk: int,
              settled: Callable[[int], int] | None):
    """``(offset, length, is_data)`` in order: each chunk of data to
    read, and each hole between them, to hash as zeros. ``settled(o)``
    waits until the file is final past ``o`` and says how far: no
    extent is looked up beyond, where a copy may still write."""
    offset = 0
    while offset < size:
        limit = min(size, settled(offset)) if settled else size
        try:
            start = min(os.lseek(fd, offset, os.SEEK_DATA), limit)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            start = limit
        if start > offset:
            yield offset, start - offset, False
        else:
            start = min(os.lseek(fd, offset, os.SEEK_HOLE), limit,
                        offset + chunk)
            yield offset, start - offset, True
        offset = start


def walk(fd: int, size: int, chunk: int, sinks, visit,
         progress: Progress | None, throttle: Throttle, io: int,
         settled: Callable[[int], int] | None = None) -> None:
    """Read the whole file in order, only its data: each sink is given
    ``data(offset, bytes)`` of each chunk read and ``hole(start, end)``
    of each hole; ``visit(offset, view)``, if given, sees each chunk in
    the aligned buffer it was read into.

    The next chunks are read on threads of their own while this one is
    handed on (hashed, written), so the disk always has a read queued:
    a copy then takes about as long as its slower side, not the sum.
    """
    # Anonymous maps are page-aligned, as O_DIRECT needs; freed with
    # the last view of them.
    buffers = [mmap.mmap(-1, chunk) for _ in range(READ_AHEAD + 1)]

    def read(offset: int, length: int, buffer) -> memoryview:
        view = memoryview(buffer)[:length]
        for start in range(0, length, io):
            piece = view[start:start + io]
            if os.preadv(fd, [piece], offset + start) != len(piece):
                raise OSError(errno.EIO, 'short read at %d'
                              % (offset + start))
        return view

    with futures.ThreadPoolExecutor(max_workers=READ_AHEAD,
                                    initializer=idle_io) as readers:
        pending: collections.deque = collections.deque()
        segments = _segments(fd, size, chunk, settled)
        turn = 0
        while True:
            # Chunk k reuses the buffer of chunk k - READ_AHEAD - 1,
            # which the previous turn of this loop finished with.
            while len(pending) <= READ_AHEAD:
                segment = next(segments, None)
                if segment is None:
                    break
                offset, length, is_data = segment
                reading = None
                if is_data:
                    reading = readers.submit(read, offset, length,
                                             buffers[turn % len(buffers)])
                    turn += 1
                pending.append((offset, length, reading))
            if not pending:
                return
            offset, length, reading = pending.popleft()
            if reading is None:
                for sink in sinks:
                    sink.hole(offset, offset + length)
                continue
            view = reading.result()
            # A copy, which the sinks may keep: the buffer is read into
            # again READ_AHEAD chunks on.
            data = bytes(view)
            for sink in sinks:
                sink.data(offset, data)
            if visit:
                visit(offset, view)
            if progress:
                progress(offset + length, size)
            throttle(offset + length)


def idle_io() -> None:
    """This thread's I/O in the idle class, which the disk serves after
    every other request (mq-deadline and BFQ age it: it is not
    starved)."""
    psutil.Process(threading.get_native_id()).ionice(
        psutil.IOPRIO_CLASS_IDLE)


@contextlib.contextmanager
def background_io():
    """The calling thread's I/O, and its readers', in the idle class."""
    thread = psutil.Process(threading.get_native_id())
    before = thread.ionice()
    idle_io()
    try:
        yield
    finally:
        thread.ionice(before.ioclass, before.value)


def _hash(fd: int, size: int, chunk: int, io: int,
          throttle: Throttle) -> str:
    digest = Digest()
    walk(fd, size, chunk, [digest], None, None, throttle, io)
    return digest.hexdigest()


@background_io()
def sha256_from_disk(path: str, chunk_size: int, io_size: int = 0,
                     throttle: Throttle | None = None) -> str:
    """The file's sha256, read with O_DIRECT (or after its cached pages
    are dropped), holes hashed as zeros, at the throttle's pace."""
    chunk, io = sizes(chunk_size, io_size)
    fd, direct = open_direct(path, os.O_RDONLY, os.stat(path).st_size)
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return _hash(fd, os.fstat(fd).st_size, chunk, io,
                     throttle or Throttle(0))
    finally:
        os.close(fd)

"""The data copy of a migration: src read once, dst checked from the disk.

src is hashed as it is copied, and its holes (``SEEK_HOLE``) are hashed
as the zeros they read as, without being read. dst is written with
O_DIRECT, so what is verified afterwards comes from the disk, not from
the page cache; where O_DIRECT is refused (tmpfs), dst is written and
fdatasync'd, then its cached pages are dropped before the check. When
src and dst share a file system the kernel copies (a reflink, or
``copy_file_range``), and src is read once, for its digest.

All of it is background I/O: the disk serves the guests' requests first
(the idle I/O class), and at most two chunks of dst are being written
back at a time, so a guest's write never waits behind a volume's worth
of dirty pages. A bandwidth cap paces every pass over the disk (the
copy, the hash of src beside the kernel's copy, and the check), since a
guest on that disk waits behind whichever of them runs unpaced.
"""

import collections
from collections.abc import Callable
from concurrent import futures
import contextlib
import errno
import fcntl
import hashlib
import mmap
import os
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils
import psutil

from volmig import exception
from volmig.volume_service import writeback

# Linux's FICLONE ioctl: dst shares src's blocks (btrfs, XFS).
FICLONE = 0x40049409
# O_DIRECT transfers must be aligned to the device's logical block.
ALIGN = 4096
# Chunks read ahead of the one being hashed and written.
READ_AHEAD = 2

Progress = Callable[[int, int], None]

LOG = logging.getLogger(__name__)
# Seconds between progress records of a copy.
PROGRESS_INTERVAL = 0.5


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


class _Throttle:

    def __init__(self, max_bytes_per_second: int):
        self.rate = max_bytes_per_second
        self.began = time.monotonic()

    def __call__(self, done: int) -> None:
        if self.rate:
            # Sleep until the average rate is back under the cap.
            ahead = done / self.rate - (time.monotonic() - self.began)
            if ahead > 0:
                time.sleep(ahead)


class _Digest:
    """sha256 on a thread of its own, so hashing overlaps the I/O
    (hashlib lets go of the GIL on large buffers). At most two chunks
    wait, in order."""

    def __init__(self):
        self._sha = hashlib.sha256()
        self._executor = futures.ThreadPoolExecutor(max_workers=1)
        self._pending: list[futures.Future] = []

    def update(self, data) -> None:
        if len(self._pending) >= 2:
            self._pending.pop(0).result()
        # A copy: the caller's buffer is reused for the next read.
        self._pending.append(self._executor.submit(self._sha.update,
                                                   bytes(data)))

    def hexdigest(self) -> str:
        for pending in self._pending:
            pending.result()
        self._executor.shutdown()
        return self._sha.hexdigest()


def _sizes(chunk_size: int, io_size: int) -> tuple[int, int]:
    """The chunk, and the largest single I/O within it, aligned."""
    chunk = max(ALIGN, chunk_size // ALIGN * ALIGN)
    return chunk, max(ALIGN, min(io_size or chunk, chunk) // ALIGN * ALIGN)


def conf_sizes(conf) -> tuple[int, int]:
    """``[storage] copy_chunk_kb`` and ``copy_io_kb``, in bytes."""
    return (conf.storage.copy_chunk_kb * 1024,
            conf.storage.copy_io_kb * 1024)


def _hash_holes(digest, start: int, end: int, zeros: bytes) -> None:
    while start < end:
        step = min(len(zeros), end - start)
        digest.update(zeros[:step])
        start += step


def _open_direct(path: str, flags: int, size: int) -> tuple[int, bool]:
    """O_DIRECT when the file system takes it and the size is aligned."""
    if size % ALIGN == 0:
        try:
            return os.open(path, flags | os.O_DIRECT), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags), False


def _settle(fd: int, size: int, direct: bool) -> None:
    """Make dst whole and durable, and the next read of it come from the
    disk."""
    os.ftruncate(fd, size)
    os.fdatasync(fd)
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _segments(fd: int, size: int, chunk: int):
    """``(offset, length, is_data)`` in order: each chunk of data to
    read, and each hole between them, to hash as zeros."""
    hashed = 0
    for start, length in data_extents(fd, size):
        if start > hashed:
            yield hashed, start - hashed, False
        for offset in range(start, start + length, chunk):
            yield offset, min(chunk, start + length - offset), True
        hashed = start + length
    if size > hashed:
        yield hashed, size - hashed, False


def _walk(fd: int, size: int, chunk: int, digest, zeros, visit,
          progress: Progress | None, throttle: _Throttle,
          io: int) -> None:
    """Hash the whole file, reading only its data; ``visit(offset, view)``
    sees each chunk of data read.

    The next chunks are read on threads of their own while this one is
    hashed and visited (written), so the disk always has a read queued:
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
                                    initializer=_idle_io) as readers:
        pending: collections.deque = collections.deque()
        segments = _segments(fd, size, chunk)
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
                _hash_holes(digest, offset, offset + length, zeros)
                continue
            view = reading.result()
            digest.update(view)
            visit(offset, view)
            if progress:
                progress(offset + length, size)
            throttle(offset + length)


def _idle_io() -> None:
    """This thread's I/O in the idle class, which the disk serves after
    every other request (mq-deadline and BFQ age it: it is not
    starved)."""
    psutil.Process(threading.get_native_id()).ionice(
        psutil.IOPRIO_CLASS_IDLE)


@contextlib.contextmanager
def _background_io():
    """The calling thread's I/O, and its readers', in the idle class."""
    thread = psutil.Process(threading.get_native_id())
    before = thread.ionice()
    _idle_io()
    try:
        yield
    finally:
        thread.ionice(before.ioclass, before.value)


def _same_file_system(src_path: str, dst_path: str) -> bool:
    return os.stat(src_path).st_dev == os.stat(dst_path).st_dev


def _kernel_copy(src_fd: int, dst_fd: int, size: int, io: int,
                 progress: Progress | None, throttle: _Throttle) -> None:
    """A reflink where the file system offers one, else copy_file_range
    over src's data only, so dst keeps its holes."""
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
        return
    except OSError:
        pass
    behind = writeback.WriteBehind(dst_fd)
    for start, length in data_extents(src_fd, size):
        offset, end = start, start + length
        while offset < end:
            copied = os.copy_file_range(src_fd, dst_fd,
                                        min(io, end - offset), offset,
                                        offset)
            if copied == 0:
                raise OSError(errno.EIO, 'copy_file_range stopped at %d'
                              % offset)
            behind.written(offset, copied)
            offset += copied
            if progress:
                progress(offset, size)
            throttle(offset)
    behind.drain()


def _unless(failed: threading.Event) -> None:
    if failed.is_set():
        raise InterruptedError('the copy failed: its hash is not wanted')


@_background_io()
def copy(src_path: str, dst_path: str, chunk_size: int,
         max_bytes_per_second: int = 0,
         progress: Progress | None = None, offload: bool = True,
         io_size: int = 0) -> str:
    """Copy src into dst, which is new and reads as zeros; returns src's
    sha256. Zero chunks and holes of src are not written, so dst stays
    sparse where src is empty. ``offload``: the kernel copies when src
    and dst share a file system. ``io_size``: the largest single read or
    write, the chunk's size if 0."""
    chunk, io = _sizes(chunk_size, io_size)
    zeros = bytes(chunk)
    digest = _Digest()
    throttle = _Throttle(max_bytes_per_second)
    src = os.open(src_path, os.O_RDONLY)
    try:
        size = os.fstat(src).st_size
        if offload and _same_file_system(src_path, dst_path):
            # src is hashed while the kernel copies it, at the same pace;
            # a copy that fails (or is stopped) stops the hash too.
            failed = threading.Event()
            with futures.ThreadPoolExecutor(max_workers=1) as hasher:
                hashed = hasher.submit(
                    _walk, src, size, chunk, digest, zeros,
                    lambda offset, view: _unless(failed), None,
                    _Throttle(max_bytes_per_second), io)
                dst = os.open(dst_path, os.O_WRONLY)
                try:
                    _kernel_copy(src, dst, size, io, progress, throttle)
                    _settle(dst, size, direct=False)
                except BaseException:
                    failed.set()
                    raise
                finally:
                    os.close(dst)
                hashed.result()
            return digest.hexdigest()
        dst, direct = _open_direct(dst_path, os.O_WRONLY, size)
        try:
            def write(offset, view):
                if view != zeros[:len(view)]:
                    for start in range(0, len(view), io):
                        os.pwritev(dst, [view[start:start + io]],
                                   offset + start)
            _walk(src, size, chunk, digest, zeros, write, progress, throttle,
                  io)
            _settle(dst, size, direct)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return digest.hexdigest()


@_background_io()
def sha256_from_disk(path: str, chunk_size: int, io_size: int = 0,
                     max_bytes_per_second: int = 0) -> str:
    """The file's sha256, read with O_DIRECT (or after its cached pages
    are dropped), holes hashed as zeros, at most at the given rate."""
    chunk, io = _sizes(chunk_size, io_size)
    digest = _Digest()
    fd, direct = _open_direct(path, os.O_RDONLY, os.stat(path).st_size)
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        _walk(fd, os.fstat(fd).st_size, chunk, digest, bytes(chunk),
              lambda offset, view: None, None,
              _Throttle(max_bytes_per_second), io)
    finally:
        os.close(fd)
    return digest.hexdigest()


def checked_copy(src_path: str, dst_path: str, conf, name: str,
                 max_bytes_per_second: int = 0,
                 progress: Progress | None = None,
                 copied: Callable[[], None] = lambda: None) -> str:
    """Copy src into dst, then read dst back from the disk; returns the
    digest both have. ``copied`` runs between the two passes, which keep
    to the same cap. Raises ChecksumMismatch, naming ``name``, when they
    differ."""
    chunk, io = conf_sizes(conf)
    src_sum = copy(src_path, dst_path, chunk, max_bytes_per_second,
                   progress, conf.storage.copy_offload, io)
    copied()
    # src is frozen since start, so dst, read back from the disk, must
    # match the digest src had as it was copied.
    dst_sum = sha256_from_disk(dst_path, chunk, io, max_bytes_per_second)
    if src_sum != dst_sum:
        raise exception.ChecksumMismatch(volume_id=name, src=src_sum,
                                         dst=dst_sum)
    return src_sum


def verified_copy(volumes, conf, volume: dict, dst: dict,
                  max_bytes_per_second: int,
                  check: Callable[[], None] = lambda: None) -> None:
    """Copy src to dst of a volume's move, recording its progress and
    times on the volume, then verify dst read back from the disk.
    ``check`` runs with each progress record; it raises to stop."""
    last = [0.0]

    def progress(done, total):
        now = time.monotonic()
        if now - last[0] >= PROGRESS_INTERVAL or done == total:
            last[0] = now
            check()
            volumes.update_volume(
                volume['id'], migration_progress=round(
                    100.0 * done / total, 1) if total else 100.0)

    def copied():
        volumes.update_volume(
            volume['id'], migration_copy_ended_at=timeutils.utcnow(),
            migration_copy_seconds=round(time.monotonic() - began, 3))

    began = time.monotonic()
    volumes.update_volume(volume['id'],
                          migration_copy_started_at=timeutils.utcnow())
    checksum = checked_copy(volume['path'], dst['path'], conf, volume['id'],
                            max_bytes_per_second, progress, copied)
    volumes.update_volume(volume['id'], migration_checksum=checksum)
    LOG.info('Copy of volume %s verified: sha256 %s', volume['id'],
             checksum)

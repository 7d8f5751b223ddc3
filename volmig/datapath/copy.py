"""The data copy of a migration: src read once, dst checked from the disk.

src is hashed as it is copied (``reading``), its digest the volume's
record. dst is written with
O_DIRECT, or, when src and dst share a file system, by the kernel (a
reflink, or ``copy_file_range``) with each chunk written back and
dropped from the page cache as the copy goes, so a guest's write on the
disk never waits behind a volume's worth of dirty pages. dst is read
back with O_DIRECT behind the copy, each chunk once it is on the disk,
and compared with the chunk of src the copy read (``check``): the check
comes from the disk, not from the page cache, and costs no pass of its
own after the copy. Where O_DIRECT is refused (tmpfs), dst is
fdatasync'd, its cached pages dropped, and read back and hashed after
the copy.

All of it is background I/O (the idle I/O class), and one pace
(``pacing``) keeps every pass over the disk (the copy, the hash of src
beside the kernel's copy, the check) to the rate the guests on that disk
leave it, under the copy's ceiling, since a guest waits behind whichever
of them runs unpaced.
"""

from collections.abc import Callable
from concurrent import futures
import errno
import fcntl
import os
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import exception
from volmig.datapath import check
from volmig.datapath import pacing
from volmig.datapath import reading
from volmig.datapath import writeback

# Linux's FICLONE ioctl: dst shares src's blocks (btrfs, XFS).
FICLONE = 0x40049409

LOG = logging.getLogger(__name__)
# Seconds between progress records of a copy: each is a commit, and a
# flush of the disk when the database shares it (``flushes.BUSY``).
PROGRESS_INTERVAL = 1.0


def conf_sizes(conf) -> tuple[int, int]:
    """``[storage] copy_chunk_kb`` and ``copy_io_kb``, in bytes."""
    return (conf.storage.copy_chunk_kb * 1024,
            conf.storage.copy_io_kb * 1024)


def _settle(fd: int, size: int, direct: bool) -> None:
    """Make dst whole and durable, and the next read of it come from the
    disk."""
    os.ftruncate(fd, size)
    os.fdatasync(fd)
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _same_file_system(src_path: str, dst_path: str) -> bool:
    return os.stat(src_path).st_dev == os.stat(dst_path).st_dev


def _kernel_copy(src_fd: int, dst_fd: int, size: int, io: int,
                 progress: reading.Progress | None,
                 throttle: reading.Throttle, behind: check.Behind) -> None:
    """A reflink where the file system offers one, else copy_file_range
    over src's data only, so dst keeps its holes."""
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
        return
    except OSError:
        pass
    writing = writeback.WriteBehind(dst_fd)
    for start, length in reading.data_extents(src_fd, size):
        offset, end = start, start + length
        while offset < end:
            copied = os.copy_file_range(src_fd, dst_fd,
                                        min(io, end - offset), offset,
                                        offset)
            if copied == 0:
                raise OSError(errno.EIO, 'copy_file_range stopped at %d'
                              % offset)
            writing.written(offset, copied)
            # What came before this piece is written back now.
            behind.advance(offset)
            offset += copied
            if progress:
                progress(offset, size)
            throttle(offset)
    writing.drain()


def _direct(src: int, dst_path: str, size: int, chunk: int, io: int,
            digest: reading.Digest, progress: reading.Progress | None,
            throttle: reading.Throttle, behind: check.Behind) -> None:
    """src read, hashed and handed to the check here, dst written with
    O_DIRECT."""
    zeros = bytes(chunk)
    dst, direct = reading.open_direct(dst_path, os.O_WRONLY, size)
    try:
        def write(offset, view):
            if view != zeros[:len(view)]:
                for start in range(0, len(view), io):
                    os.pwritev(dst, [view[start:start + io]], offset + start)
            behind.advance(offset + len(view))
        reading.walk(src, size, chunk, [digest, behind], write, progress,
                     throttle, io)
        behind.advance(size)
        _settle(dst, size, direct)
    finally:
        os.close(dst)


@reading.background_io()
def copy(src_path: str, dst_path: str, chunk_size: int,
         share: pacing.Share | None = None,
         progress: reading.Progress | None = None, offload: bool = True,
         io_size: int = 0, behind: check.Behind | None = None) -> str:
    """Copy src into dst, which is new and reads as zeros; returns src's
    sha256. Zero chunks and holes of src are not written, so dst stays
    sparse where src is empty. ``offload``: the kernel copies when src
    and dst share a file system. ``io_size``: the largest single read or
    write, the chunk's size if 0. ``behind`` is moved on as dst is on
    the disk and given src as it is read, and failed if the copy fails,
    which stops whatever reads behind it. ``share``: the copy's pace,
    none if not given."""
    chunk, io = reading.sizes(chunk_size, io_size)
    digest = reading.Digest()
    share = share or pacing.Share(0)
    throttle = share.throttle()
    behind = behind or check.Behind(chunk, checked=False)
    # Shut down only once a failure is known, so a hash beside a failed
    # copy stops instead of reading the rest of src first.
    hasher = futures.ThreadPoolExecutor(max_workers=1)
    src = os.open(src_path, os.O_RDONLY)
    try:
        size = os.fstat(src).st_size
        if not (offload and _same_file_system(src_path, dst_path)):
            _direct(src, dst_path, size, chunk, io, digest, progress,
                    throttle, behind)
            return digest.hexdigest()
        # src is hashed while the kernel copies it, at the same pace;
        # ``behind`` stops it once the copy fails.
        hashed = hasher.submit(
            reading.walk, src, size, chunk, [digest, behind], None, None,
            share.throttle(), io)
        dst = os.open(dst_path, os.O_WRONLY)
        try:
            _kernel_copy(src, dst, size, io, progress, throttle, behind)
            behind.advance(size)
            _settle(dst, size, direct=False)
        finally:
            os.close(dst)
        hashed.result()
        return digest.hexdigest()
    except BaseException:
        behind.fail()
        raise
    finally:
        hasher.shutdown()
        os.close(src)


def checked_copy(src_path: str, dst_path: str, conf, name: str,
                 max_bytes_per_second: int = 0,
                 progress: reading.Progress | None = None,
                 copied: Callable[[], None] = lambda: None,
                 paced: bool = True) -> str:
    """Copy src into dst, and compare dst, read back from the disk behind
    the copy, with src; returns src's digest. ``copied`` runs once the
    copy is done. ``paced``: False where src's disk is not this host's
    (``[storage] copy_pacing`` does not apply). Raises CopyMismatch,
    naming ``name``, when they differ."""
    chunk, io = conf_sizes(conf)
    size = os.stat(src_path).st_size
    behind = check.Behind(chunk)
    with pacing.shared(src_path, max_bytes_per_second,
                       conf.storage.copy_pacing and paced) as share, \
            futures.ThreadPoolExecutor(max_workers=1) as checker:
        checking = checker.submit(check.compare, dst_path, size, chunk, io,
                                  share.throttle(), behind, name)
        # A copy that fails fails ``behind``, which stops the check.
        src_sum = copy(src_path, dst_path, chunk, share, progress,
                       conf.storage.copy_offload, io, behind)
        copied()
        if checking.result():
            return src_sum
        # O_DIRECT refused: read back once dst's cached pages are
        # dropped, and hashed, as src is no longer at hand.
        dst_sum = reading.sha256_from_disk(dst_path, chunk, io,
                                           share.throttle())
    if src_sum != dst_sum:
        raise exception.CopyMismatch(
            volume_id=name, difference='sha256 %s != %s' % (src_sum,
                                                             dst_sum))
    return src_sum


def checksum(path: str, conf, max_bytes_per_second: int,
             paced: bool = True) -> str:
    """A volume's sha256 from the disk, at the pace its disk allows
    (``paced`` as ``checked_copy`` takes it)."""
    chunk, io = conf_sizes(conf)
    with pacing.shared(path, max_bytes_per_second,
                       conf.storage.copy_pacing and paced) as share:
        return reading.sha256_from_disk(path, chunk, io, share.throttle())


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

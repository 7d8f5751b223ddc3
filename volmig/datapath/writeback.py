"""Write-behind for a migration's copy: each chunk written starts going
to the disk at once, so the guests' writes on the same disk never queue
behind a volume's worth of dirty pages."""

import ctypes
import os

# sync_file_range(2) flags; Python's os module does not wrap the call.
_WAIT_BEFORE, _WRITE, _WAIT_AFTER = 1, 2, 4
_libc = ctypes.CDLL(None, use_errno=True)
_libc.sync_file_range.argtypes = (ctypes.c_int, ctypes.c_int64,
                                  ctypes.c_int64, ctypes.c_uint)


def _sync_range(fd: int, offset: int, length: int, flags: int) -> None:
    if _libc.sync_file_range(fd, offset, length, flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class WriteBehind:
    """Each chunk written starts going to the disk at once, and the copy
    waits for the one before it: at most two chunks are in flight, so
    the guests' writes on this disk do not queue behind a volume's
    dirty pages."""

    def __init__(self, fd: int):
        self._fd = fd
        self._flying: tuple[int, int] | None = None

    def written(self, offset: int, length: int) -> None:
        _sync_range(self._fd, offset, length, _WRITE)
        self.drain()
        self._flying = offset, length

    def drain(self) -> None:
        if self._flying:
            offset, length = self._flying
            _sync_range(self._fd, offset, length,
                        _WAIT_BEFORE | _WRITE | _WAIT_AFTER)
            # Clean now: dropped rather than crowd the guests' cache.
            os.posix_fadvise(self._fd, offset, length,
                             os.POSIX_FADV_DONTNEED)
            self._flying = None

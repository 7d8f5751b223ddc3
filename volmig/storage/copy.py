"""The data copy of a migration: streamed, sparse, throttled, verified."""

from collections.abc import Callable
import hashlib
import os
import time


def copy(src_path: str, dst_path: str, chunk_size: int,
         max_bytes_per_second: int = 0,
         progress: Callable[[int, int], None] | None = None) -> int:
    """Copy src into dst, which is new and reads as zeros.

    Chunks of zeros are not written, so dst stays sparse where src is
    empty. Returns the bytes read.
    """
    zeros = bytes(chunk_size)
    buffer = bytearray(chunk_size)
    view = memoryview(buffer)
    began = time.monotonic()
    done = 0
    with open(src_path, 'rb', buffering=0) as src, \
            open(dst_path, 'r+b', buffering=0) as dst:
        total = src.seek(0, 2)
        src.seek(0)
        while True:
            length = src.readinto(buffer)
            if not length:
                break
            if view[:length] != zeros[:length]:
                dst.seek(done)
                dst.write(view[:length])
            done += length
            if progress:
                progress(done, total)
            if max_bytes_per_second:
                # Sleep until the average rate is back under the cap.
                ahead = done / max_bytes_per_second - (time.monotonic()
                                                       - began)
                if ahead > 0:
                    time.sleep(ahead)
        dst.truncate(total)
        dst.flush()
        os.fsync(dst.fileno())
    return done


def sha256(path: str, chunk_size: int) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(chunk_size)
    view = memoryview(buffer)
    with open(path, 'rb', buffering=0) as handle:
        while length := handle.readinto(buffer):
            digest.update(view[:length])
    return digest.hexdigest()

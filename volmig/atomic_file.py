"""Durable whole-file writes for the small JSON state files.

They are the agent's and the volume service's own (journals, guest
records, volume records): readable by their owner only.
"""

import contextlib
import json
import os


def write_json(path: str, record: dict) -> None:
    """Replace ``path`` atomically and fsync it, so a crash leaves the old
    or the new content, never a mix."""
    tmp_path = path + '.tmp'
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp_path)
    with os.fdopen(os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                           0o600), 'w') as handle:
        json.dump(record, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp_path, path)
    directory = os.open(os.path.dirname(path) or '.', os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)

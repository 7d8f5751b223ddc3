"""Durable whole-file writes for the small JSON state files."""

import json
import os


def write_json(path: str, record: dict) -> None:
    """Replace ``path`` atomically and fsync it, so a crash leaves the old
    or the new content, never a mix."""
    tmp_path = path + '.tmp'
    with open(tmp_path, 'w') as handle:
        json.dump(record, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp_path, path)
    directory = os.open(os.path.dirname(path) or '.', os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)

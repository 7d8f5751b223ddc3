"""A pool's drain, whichever service runs it (volmig-volume for its own
pools, the conductor for a Cinder backend): the states of a drain and of
each of its volumes, and its progress."""

from oslo_utils import timeutils

RUNNING, COMPLETED, CANCELLED = 'running', 'completed', 'cancelled'
# An entry's state.
PENDING, MIGRATING, DONE = 'pending', 'migrating', 'done'
WAITING, FAILED, SKIPPED = 'waiting', 'failed', 'skipped'
OPEN = (PENDING, MIGRATING, WAITING)


def progress(drain: dict, volumes: dict[str, dict]) -> dict:
    """Volumes and bytes done of the whole drain, and the time left."""
    moving = [e for e in drain['volumes'] if e['state'] != SKIPPED]
    total = sum(e['size_mb'] for e in moving) * 1024 * 1024
    done = 0.0
    for entry in moving:
        size = entry['size_mb'] * 1024 * 1024
        if entry['state'] == DONE:
            done += size
        elif entry['state'] == MIGRATING:
            volume = volumes.get(entry['volume_id']) or {}
            done += size * (volume.get('migration_progress') or 0) / 100
    elapsed = timeutils.delta_seconds(drain['created_at'],
                                      drain['finished_at']
                                      or timeutils.utcnow())
    eta = None
    if drain['status'] == RUNNING and 0 < done < total:
        eta = round((total - done) * elapsed / done, 1)
    counts = {state: sum(1 for e in drain['volumes'] if e['state'] == state)
              for state in (PENDING, MIGRATING, DONE, WAITING, FAILED,
                            SKIPPED)}
    return {'volumes_total': len(drain['volumes']),
            'volumes_done': counts[DONE], 'volumes': counts,
            'bytes_total': total, 'bytes_done': int(done),
            'elapsed_seconds': round(elapsed, 1), 'eta_seconds': eta}


def counts(entries: list[dict]) -> dict[str, int]:
    """A drain's volumes, counted by state."""
    found: dict[str, int] = {}
    for entry in entries:
        found[entry['state']] = found.get(entry['state'], 0) + 1
    return found

"""A pool's drain, whichever service runs it (volmig-volume for its own
pools, the conductor for a Cinder backend): the states of a drain and of
each of its volumes, and its progress."""

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from volmig import exception
from volmig.db import drains as drains_db

LOG = logging.getLogger(__name__)

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


def pass_each(lock, one_pass) -> None:
    """``one_pass`` over each running drain, one pass at a time (``lock``:
    two at once could begin volumes past ``max_parallel``); a pass that
    fails is logged, and the next drain gets its own."""
    with lock:
        for drain in drains_db.running():
            try:
                one_pass(drain)
            except Exception:
                LOG.exception('Drain %s of pool %s: pass failed',
                              drain['id'], drain['pool'])


def record(pool: str, target: str, entries: list[dict], max_parallel: int,
           max_bandwidth_mbps: int | None, dry_run: bool) -> dict:
    """The plan as a dry run's answer, or the drain recorded, running:
    one drain at a time runs on a pool."""
    if dry_run:
        return {'pool': pool, 'target_pool': target, 'dry_run': True,
                'max_parallel': max_parallel,
                'max_bandwidth_mbps': max_bandwidth_mbps,
                'volumes': entries}
    running = drains_db.latest(pool)
    if running and running['status'] == RUNNING:
        raise exception.DrainRunning(pool=pool, drain_id=running['id'],
                                     target=running['target_pool'])
    return drains_db.create(
        id=uuidutils.generate_uuid(), pool=pool, target_pool=target,
        status=RUNNING, max_parallel=max_parallel,
        max_bandwidth_mbps=max_bandwidth_mbps, volumes=entries)


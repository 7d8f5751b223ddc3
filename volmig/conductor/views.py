"""What callers are shown of a migration's record."""

from oslo_utils import timeutils


def present(migration: dict) -> dict:
    """The public view: add an estimate of the time left."""
    view = dict(migration, eta_seconds=None)
    # Which process waits on a start is the conductor's business alone.
    view.pop('owner', None)
    started = migration.get('job_started_at')
    done, total = migration['bytes_done'], migration['bytes_total']
    if started and total and 0 < done < total:
        elapsed = max(timeutils.delta_seconds(started, timeutils.utcnow()),
                      0.001)
        view['eta_seconds'] = round((total - done) * elapsed / done, 1)
    return view

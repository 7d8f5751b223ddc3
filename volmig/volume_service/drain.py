"""Emptying a pool: every volume planned, then moved under caps.

The plan says how each volume in the pool moves:

- ``copy``: no attachment; a plain copy;
- ``live``: attached to one server, or read-only to several (no guest
  writes it, so src is frozen at once);
- ``offline``: attached read/write to several servers. It moves once
  every one of them is shut off; while any runs, the start is refused and
  the volume waits, tried again every ``WAIT_RETRY`` seconds (a volume
  whose server is busy migrating another of its volumes, sooner);
- ``none``: it cannot move; the reason says why.

A drain is a record. Each pass brings its entries up to date from the
volumes' own records and begins the next ones its ``max_parallel``
allows, so a restart of volmig-volume (or of any service) resumes it
where it stopped: a volume that reached the target pool is done and is
never copied again, and one cut off mid-copy is resumed by the mover.

A drain's start and end, and each change of a volume's state once a pass
has recorded it, are sent as ``volume_pool.drain.start``, ``.end`` and
``.volume`` notifications.
"""

import os
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import context as volmig_context
from volmig import drains
from volmig import exception
from volmig import states
from volmig.db import drains as drains_db
from volmig.notifications import drains as drain_notifications
from volmig.volume_service import pool_moves

LOG = logging.getLogger(__name__)

RUNNING, COMPLETED, CANCELLED = drains.RUNNING, drains.COMPLETED, \
    drains.CANCELLED
PENDING, MIGRATING, DONE = drains.PENDING, drains.MIGRATING, drains.DONE
WAITING, FAILED, SKIPPED = drains.WAITING, drains.FAILED, drains.SKIPPED
OPEN = drains.OPEN
# Seconds until the next try of a volume whose start was refused for a
# reason that passes: its servers must be shut off, or one of them is
# busy (one task per server, and a drain moves a server's volumes in
# turn). Any other refusal fails the volume.
WAIT_RETRY = 10.0
BUSY_RETRY = 2.0
_WAIT_ON = {exception.MultiattachMigrationNotSupported: WAIT_RETRY,
            exception.InstanceMustBeShutOff: WAIT_RETRY,
            exception.MigrationInProgress: BUSY_RETRY}


def capacity_mb(path: str) -> int:
    stat = os.statvfs(path)
    return stat.f_blocks * stat.f_frsize // (1024 * 1024)


def classify(volume: dict, target: str,
             target_capacity_mb: int) -> tuple[str, str]:
    """How a volume leaves its pool for ``target``: (action, reason)."""
    if volume['migration_source']:
        return 'none', ('it is the destination of the migration of volume '
                        '%s' % volume['migration_source'])
    if (volume['migration_status'] in states.POOL_MOVE_UNDER_WAY
            and volume['migration_pool'] != target):
        return 'none', ('it is migrating to pool %s'
                        % volume['migration_pool'])
    if volume['migration_status'] == 'error' and volume['migration_dst']:
        return 'none', ('its last migration needs an operator: %s'
                        % volume['migration_error'])
    if volume['size_mb'] > target_capacity_mb:
        return 'none', ('its %d MiB do not fit pool %s (%d MiB)'
                        % (volume['size_mb'], target, target_capacity_mb))
    attached = [a for a in volume['attachments']
                if a['attach_status'] == states.ATTACH_ATTACHED]
    if not attached:
        return 'copy', 'not attached: a plain copy'
    if len(attached) == 1:
        return 'live', 'attached to one server: moved live'
    if all(a['attach_mode'] == 'ro' for a in attached):
        return 'live', ('attached read-only to %d servers: moved live'
                        % len(attached))
    return 'offline', ('attached read/write to %d servers: moved offline '
                       'once all of them are shut off' % len(attached))


def plan(volumes: list[dict], pool: str, target: str,
         target_capacity_mb: int) -> list[dict]:
    entries = []
    for volume in volumes:
        if volume['pool'] != pool:
            continue
        action, reason = classify(volume, target, target_capacity_mb)
        entries.append({'volume_id': volume['id'], 'name': volume['name'],
                        'size_mb': volume['size_mb'], 'action': action,
                        'reason': reason,
                        'state': SKIPPED if action == 'none' else PENDING,
                        'retry_at': None})
    return entries


def refresh(entry: dict, volume: dict | None, target: str) -> dict:
    """The entry as the volume's own record now shows it."""
    entry = dict(entry)
    if volume is None:
        entry.update(state=SKIPPED, reason='deleted during the drain')
    elif (volume['pool'] == target
          and volume['migration_status'] not in states.POOL_MOVE_UNDER_WAY):
        entry['state'] = DONE
    elif volume['migration_status'] in states.POOL_MOVE_UNDER_WAY:
        entry['state'] = MIGRATING
    elif entry['state'] == MIGRATING:
        entry.update(state=FAILED, reason=volume['migration_error'])
    return entry


def servers(volumes) -> dict[str, list[str]]:
    """The servers each volume is attached to, by volume id."""
    return {volume['id']: [a['instance_uuid'] for a in
                           volume.get('attachments', ())]
            for volume in volumes}


class Drainer:

    def __init__(self, volumes, mover: pool_moves.Mover, host: str):
        self.volumes = volumes
        self.mover = mover
        self.host = host
        self.announce = drain_notifications.Announcer('volmig-volume', host)
        # A pass runs on the periodic task and when a migration ends;
        # one at a time, or two could begin past max_parallel.
        self._passing = threading.Lock()

    def drain(self, ctxt, pool: str, target: str, max_parallel: int = 1,
              max_bandwidth_mbps: int | None = None,
              dry_run: bool = False) -> dict:
        self.mover.pool_path(pool)
        target_dir = self.mover.pool_path(target)
        if pool == target:
            raise exception.Invalid(reason='a pool cannot be drained into '
                                    'itself (%s)' % pool)
        if not isinstance(max_parallel, int) or max_parallel < 1:
            raise exception.InvalidInput(
                field='max_parallel',
                reason='expected a positive integer, not %r'
                % (max_parallel,))
        found = self.volumes.list_volumes(ctxt)
        drain = drains.record(pool, target, plan(found, pool, target,
                                                 capacity_mb(target_dir)),
                              max_parallel, max_bandwidth_mbps, dry_run)
        if dry_run:
            return drain
        entries = drain['volumes']
        LOG.info('Draining pool %s into %s: %d volume(s), %d that cannot '
                 'move, at most %d at once', pool, target, len(entries),
                 sum(1 for e in entries if e['state'] == SKIPPED),
                 max_parallel)
        self.announce.drain(ctxt, drain, 'start')
        self.announce.volumes(ctxt, drain, [], servers(found))
        return self.show(ctxt, pool, drain)

    def show(self, ctxt, pool: str, drain: dict | None = None) -> dict:
        """The pool's latest drain, with its progress."""
        drain = drain or drains_db.latest(pool)
        if drain is None:
            raise exception.DrainNotFound(pool=pool)
        volumes = self.volumes.volumes_by_id(
            e['volume_id'] for e in drain['volumes'])
        return dict(drain, dry_run=False,
                    progress=drains.progress(drain, volumes))

    def history(self, ctxt, pool: str, limit: int | None = None,
                marker: str | None = None) -> list[dict]:
        """The pool's drains, newest first, each with its progress and
        without its plan (``show`` gives the latest whole). A finished
        drain's entries are final; a running one's are brought up to
        date as ``show`` does."""
        self.mover.pool_path(pool)
        shown = [self.show(ctxt, pool, drain) if drain['status'] == RUNNING
                 else dict(drain, dry_run=False,
                           progress=drains.progress(drain, {}))
                 for drain in drains_db.get_all(pool, limit, marker)]
        return [{key: value for key, value in drain.items()
                 if key != 'volumes'} for drain in shown]

    def cancel(self, ctxt, pool: str) -> dict:
        """Begin no more volumes; those under way finish."""
        drain = drains_db.latest(pool)
        if drain is None or drain['status'] != RUNNING:
            raise exception.NoDrainRunning(pool=pool)
        drain = drains_db.update(
            drain['id'], expected_status=RUNNING, status=CANCELLED,
            finished_at=timeutils.utcnow())
        LOG.warning('Drain of pool %s cancelled', pool)
        self.announce.drain(ctxt, drain, 'end')
        return self.show(ctxt, pool, drain)

    def run_once(self) -> None:
        """One pass over every running drain."""
        drains.pass_each(self._passing, self._pass)

    def _pass(self, drain: dict) -> None:
        ctxt = volmig_context.get_service_context()
        target = drain['target_pool']
        volumes = self.volumes.volumes_by_id(
            e['volume_id'] for e in drain['volumes'])
        entries = [refresh(e, volumes.get(e['volume_id']), target)
                   for e in drain['volumes']]
        active = sum(1 for e in entries if e['state'] == MIGRATING)
        now = time.time()
        for entry in entries:
            if active >= drain['max_parallel']:
                break
            due = entry['state'] == PENDING or (
                entry['state'] == WAITING and now >= entry['retry_at'])
            try:
                if due and self._begin(ctxt, drain, entry, now):
                    active += 1
            except exception.NoCopySlot:
                # The drain keeps its own order: the volume is begun,
                # not queued, when a copy slot is free.
                break
        values: dict = {'volumes': entries}
        if not any(e['state'] in OPEN for e in entries):
            values.update(status=COMPLETED, finished_at=timeutils.utcnow())
            LOG.info('Drain of pool %s into %s completed', drain['pool'],
                     target)
        try:
            updated = drains_db.update(drain['id'], expected_status=RUNNING,
                                    **values)
        except exception.NoDrainRunning:
            LOG.info('Drain %s was cancelled during its pass', drain['id'])
            return
        self.announce.volumes(ctxt, updated, drain['volumes'],
                              servers(volumes.values()))
        if updated['status'] == COMPLETED:
            self.announce.drain(ctxt, updated, 'end')

    def _begin(self, ctxt, drain: dict, entry: dict, now: float) -> bool:
        try:
            self.mover.begin(ctxt, entry['volume_id'],
                                drain['target_pool'],
                                drain['max_bandwidth_mbps'], queue=False)
        except exception.NoCopySlot:
            raise
        except tuple(_WAIT_ON) as exc:
            entry.update(state=WAITING, reason=exc.message,
                         retry_at=now + next(
                             delay for refusal, delay in _WAIT_ON.items()
                             if isinstance(exc, refusal)))
            LOG.info('Drain of pool %s: volume %s waits: %s', drain['pool'],
                     entry['volume_id'], exc.message)
            return False
        except Exception as exc:
            entry.update(state=FAILED, reason=exception.safe_message(exc))
            LOG.warning('Drain of pool %s: volume %s failed to begin: %s',
                        drain['pool'], entry['volume_id'], entry['reason'])
            return False
        entry['state'] = MIGRATING
        return True

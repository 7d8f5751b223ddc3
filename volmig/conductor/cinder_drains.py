"""Draining a Cinder backend whose volumes Nova's servers use.

The drain is the one volmig-volume runs for its own pools (the same
record, states, progress, REST API and commands), here run by the
conductor over Cinder and Nova: a pool is a Cinder pool
(``host@backend#pool``), and each volume takes the path that
``volmig.nova.paths`` picks for it. A pass, on the conductor's periodic
task, brings each entry up to date from Cinder and begins the next ones
that ``max_parallel`` allows, so a conductor that restarts takes the
drain up where it stopped: Cinder's migrations go on without it, and an
offline move records each step before taking it.

An entry of the ``offline`` path names its servers (the volume names them
no more once its attachments are gone) and its ``step``: ``held`` (the
servers are locked; their attachments go next), then ``migrating``.
"""

import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import context as volmig_context
from volmig import drains
from volmig import exception
from volmig.conductor import checks
from volmig.conf import CONF
from volmig.db import drains as drains_db
from volmig.db import instances as instances_db
from volmig.notifications import drains as drain_notifications
from volmig.nova import compute
from volmig.nova import offline
from volmig.nova import paths

LOG = logging.getLogger(__name__)

CANCELLED = 'not begun: the drain was cancelled'
# How long after Cinder ends a migration through Nova's swap the server
# may still disagree with it before the volume is failed.
SWAP_SETTLE_SECONDS = 60


def _servers(entries: list[dict]) -> dict[str, list[str]]:
    # An entry names its servers: an offline move's volume names them no
    # more once their attachments are gone.
    return {e['volume_id']: e['servers'] for e in entries}


class CinderDrains:

    def __init__(self, volumes, compute_api, host: str,
                 nova: compute.Nova | None = None):
        self.volumes = volumes
        self.compute_api = compute_api
        self._nova = nova
        self.announce = drain_notifications.Announcer('volmig-conductor', host)
        self.checksums = checks.Checksums(volumes, compute_api)
        # One pass at a time, or two could begin past max_parallel.
        self._passing = threading.Lock()

    @property
    def nova(self) -> compute.Nova:
        # Made at the first drain: a conductor that drains nothing needs
        # no [nova].
        if self._nova is None:
            self._nova = compute.Nova(CONF)
        return self._nova

    def _plan(self, ctxt, pool: str) -> list[dict]:
        found = [v for v in self.volumes.list_volumes(ctxt)
                 if v['host'] == pool]
        server_ids = {a['instance_uuid'] for v in found
                      for a in v['attachments']}
        servers = self.nova.servers(sorted(server_ids))
        own = frozenset(instances_db.instance_uuids(ctxt, server_ids))
        entries = []
        for volume in found:
            action, reason = paths.classify(volume, servers, own)
            entries.append({
                'volume_id': volume['id'], 'name': volume['name'],
                'size_mb': volume['size_mb'], 'action': action,
                'reason': reason,
                'servers': sorted(a['instance_uuid']
                                  for a in volume['attachments']),
                'state': (drains.SKIPPED if action == paths.NONE
                          else drains.PENDING),
                'step': None, 'retry_at': None})
        return entries

    def drain(self, ctxt, pool: str, target: str, max_parallel: int = 1,
              max_bandwidth_mbps: int | None = None,
              dry_run: bool = False) -> dict:
        if pool == target:
            raise exception.Invalid(reason='a pool cannot be drained into '
                                    'itself (%s)' % pool)
        pools = self.volumes.pools(ctxt)
        for name in (pool, target):
            if name not in pools:
                raise exception.PoolNotFound(pool=name)
        drain = drains.record(pool, target, self._plan(ctxt, pool),
                              max_parallel, max_bandwidth_mbps, dry_run)
        if dry_run:
            return drain
        entries = drain['volumes']
        LOG.info('Draining Cinder pool %s into %s: %d volume(s), %d that '
                 'cannot move, at most %d at once', pool, target,
                 len(entries), sum(1 for e in entries
                                   if e['state'] == drains.SKIPPED),
                 max_parallel)
        self.announce.drain(ctxt, drain, 'start')
        self.announce.volumes(ctxt, drain, [], _servers(entries))
        return self.show(ctxt, pool, drain)

    def show(self, ctxt, pool: str, drain: dict | None = None) -> dict:
        drain = drain or drains_db.latest(pool)
        if drain is None:
            raise exception.DrainNotFound(pool=pool)
        return dict(drain, dry_run=False,
                    progress=drains.progress(drain, {}))

    def history(self, ctxt, pool: str, limit: int | None = None,
                marker: str | None = None) -> list[dict]:
        return [{key: value for key, value in self.show(
            ctxt, pool, drain).items() if key != 'volumes'}
            for drain in drains_db.get_all(pool, limit, marker)]

    def cancel(self, ctxt, pool: str) -> dict:
        """Begin no more volumes. Those under way finish (an offline
        move's servers are refreshed and let go), and the drain ends as
        cancelled once they have."""
        with self._passing:
            drain = drains_db.latest(pool)
            if drain is None or drain['status'] != drains.RUNNING:
                raise exception.NoDrainRunning(pool=pool)
            entries = [dict(e, state=drains.SKIPPED, reason=CANCELLED)
                       if e['state'] in (drains.PENDING, drains.WAITING)
                       else e for e in drain['volumes']]
            updated = drains_db.update(drain['id'],
                                       expected_status=drains.RUNNING,
                                       **self._ending(drain, entries))
        LOG.warning('Drain of Cinder pool %s cancelled', pool)
        self._announce(ctxt, updated, drain['volumes'])
        return self.show(ctxt, pool, updated)

    def _announce(self, ctxt, updated: dict, before: list[dict]) -> None:
        """What changed since ``before``, and the drain's end."""
        self.announce.volumes(ctxt, updated, before,
                              _servers(updated['volumes']))
        if updated['status'] != drains.RUNNING:
            self.announce.drain(ctxt, updated, 'end')

    @staticmethod
    def _ending(drain: dict, entries: list[dict]) -> dict:
        """The values of a drain with these entries: ended once none is
        open, as cancelled if a cancel skipped any."""
        values: dict = {'volumes': entries}
        if not any(e['state'] in drains.OPEN for e in entries):
            values.update(
                status=(drains.CANCELLED if any(
                    e['reason'] == CANCELLED for e in entries)
                    else drains.COMPLETED),
                finished_at=timeutils.utcnow())
            LOG.info('Drain of Cinder pool %s into %s %s', drain['pool'],
                     drain['target_pool'], values['status'])
        return values

    def run_once(self) -> None:
        drains.pass_each(self._passing, self._pass)

    def _pass(self, drain: dict) -> None:
        ctxt = volmig_context.get_service_context()
        entries = [dict(e) for e in drain['volumes']]

        def save() -> None:
            drains_db.update(drain['id'], expected_status=drains.RUNNING,
                             volumes=entries)

        for entry in entries:
            if entry['state'] == drains.MIGRATING:
                self._follow(ctxt, drain, entry, save)
        active = sum(1 for e in entries if e['state'] == drains.MIGRATING)
        for entry in entries:
            if active >= drain['max_parallel']:
                break
            if entry['state'] == drains.PENDING:
                self._begin(ctxt, drain, entry, save)
                active += entry['state'] == drains.MIGRATING
        try:
            updated = drains_db.update(drain['id'],
                                       expected_status=drains.RUNNING,
                                       **self._ending(drain, entries))
        except exception.NoDrainRunning:
            LOG.info('Drain %s was cancelled during its pass', drain['id'])
            return
        self._announce(ctxt, updated, drain['volumes'])

    def _mover(self) -> offline.OfflineMove:
        return offline.OfflineMove(self.volumes, self.nova)

    @staticmethod
    def _reason(drain: dict) -> str:
        return 'volmig drain %s of %s' % (drain['id'], drain['pool'])

    def _begin(self, ctxt, drain: dict, entry: dict, save) -> None:
        target = drain['target_pool']
        try:
            if entry['step'] is None:
                # Its servers may have started or stopped since the plan,
                # or others attached it.
                volume = self.volumes.get_volume(ctxt, entry['volume_id'])
                entry['servers'] = sorted({a['instance_uuid']
                                           for a in volume['attachments']})
                servers = self.nova.servers(entry['servers'])
                own = frozenset(instances_db.instance_uuids(
                    ctxt, entry['servers']))
                entry['action'], entry['reason'] = paths.classify(
                    volume, servers, own)
                if entry['action'] == paths.NONE:
                    entry['state'] = drains.SKIPPED
                    return
                if entry['action'] == paths.OFFLINE:
                    self._mover().hold(entry['servers'], self._reason(drain))
                    entry['step'] = 'held'
                    save()
            if entry['action'] == paths.OFFLINE:
                self._mover().let_go(entry['volume_id'], entry['servers'])
            # Detached now: hashed before Cinder copies it.
            if entry['action'] != paths.SWAP and self.checksums.start(
                    ctxt, drain['id'], entry, checks.BEFORE, save):
                entry['state'] = drains.MIGRATING
                return
            entry['step'] = 'migrating'
            self.volumes.migrate_volume(ctxt, entry['volume_id'], target)
        except Exception as exc:
            entry['error'] = exception.safe_message(exc)
            LOG.warning('Drain of pool %s: volume %s failed to begin: %s',
                        drain['pool'], entry['volume_id'], entry['error'])
            if entry['step'] is None:
                entry.update(state=drains.FAILED, reason=entry['error'])
                return
            # Held, perhaps let go: followed to the end as any other, so
            # that its servers get their records and their freedom back.
        entry['state'] = drains.MIGRATING

    def _follow(self, ctxt, drain: dict, entry: dict, save) -> None:
        """An entry under way, as Cinder has its volume now."""
        if entry['step'] in (checks.BEFORE, checks.AFTER):
            self._follow_hash(ctxt, drain, entry, save)
            return
        try:
            volume = self.volumes.get_volume(ctxt, entry['volume_id'])
        except exception.VolumeNotFound:
            entry.update(state=drains.SKIPPED,
                         reason='deleted during the drain')
            return
        if volume['migration_status'] in paths.UNDER_WAY:
            return
        moved = volume['host'] == drain['target_pool']
        # Hashed again while still detached: before a refresh attaches
        # an offline move's volume to its servers.
        if moved and entry.get('checksum') and 'after' not in entry and \
                self.checksums.start(ctxt, drain['id'], entry,
                                     checks.AFTER, save):
            return
        if entry['action'] == paths.OFFLINE:
            if not self._finish_offline(drain, entry):
                return
        if moved and entry['action'] == paths.SWAP:
            if not self._check_swap(ctxt, entry, volume):
                return
        if not moved:
            entry.update(state=drains.FAILED, reason=entry.get('error') or (
                "Cinder's migration ended in %s; the volume stays on %s"
                % (volume['migration_status'], volume['host'])))
        elif entry.get('checksum') and entry.get('after') is not None:
            self._compare(entry)
        elif entry.get('checksum') and 'after' in entry:
            entry.update(state=drains.FAILED, reason=(
                'Cinder moved it, but it was not hashed after: %s'
                % entry.get('error')))
        else:
            entry['state'] = drains.DONE

    def _finish_offline(self, drain: dict, entry: dict) -> bool:
        """Refresh the servers' records and let them go; False (tried
        again next pass) if Nova did not take it."""
        mover = self._mover()
        try:
            mover.refresh(entry['volume_id'], entry['servers'])
            mover.release(entry['servers'], self._reason(drain))
        except Exception as exc:
            LOG.warning('Drain of pool %s: servers %s of volume %s not '
                        'refreshed yet: %s', drain['pool'],
                        ', '.join(entry['servers']), entry['volume_id'],
                        exception.safe_message(exc))
            return False
        entry['step'] = None
        return True

    def _check_swap(self, ctxt, entry: dict, volume: dict) -> bool:
        """Whether the server follows its volume, as Nova's swap should
        have made it (``volmig.conductor.checks``). False where it does not:
        the entry is followed again next pass for a while, then
        failed."""
        [server_id] = entry['servers']
        try:
            entry['check'] = checks.swapped(ctxt, self.volumes, self.nova,
                                            self.compute_api, volume,
                                            server_id)
        except exception.SwapNotVerified as exc:
            # Cinder records success before its attachments, and Nova
            # its record, have caught up: a while to agree.
            now = time.time()
            entry.setdefault('settle_by', now + SWAP_SETTLE_SECONDS)
            if now < entry['settle_by']:
                LOG.info('Drain: %s; looking again next pass',
                         exception.safe_message(exc))
                return False
            entry.update(state=drains.FAILED,
                         reason=exception.safe_message(exc))
            LOG.error('Drain: %s', entry['reason'])
            return False
        except (exception.NovaRefused, exception.NovaUnavailable) as exc:
            entry['check'] = 'not checked: %s' % exception.safe_message(exc)
        LOG.info('Drain: volume %s moved through Nova\'s swap; %s',
                 entry['volume_id'], entry['check'])
        return True

    def _follow_hash(self, ctxt, drain: dict, entry: dict, save) -> None:
        """A detached volume hashed before Cinder's migration (which
        begins once it is) or after (which the entry's end compares)."""
        step = entry['step']
        try:
            checksum = self.checksums.finish(ctxt, entry)
        except Exception as exc:
            checksum = None
            entry['error'] = 'not hashed %s the move: %s' % (
                'before' if step == checks.BEFORE else 'after',
                exception.safe_message(exc))
        else:
            if checksum is None:
                return
        entry['step'] = 'migrating'
        if step == checks.AFTER:
            entry['after'] = checksum
        elif checksum is not None:
            entry['checksum'] = checksum
            self._migrate(ctxt, drain, entry)
        # Ended, or not begun: its end (an offline move's servers given
        # their volume back) is taken now.
        if entry['state'] == drains.MIGRATING:
            self._follow(ctxt, drain, entry, save)

    def _migrate(self, ctxt, drain: dict, entry: dict) -> None:
        """Cinder's migration of the hashed volume."""
        if entry['action'] == paths.COPY and self.volumes.get_volume(
                ctxt, entry['volume_id'])['attachments']:
            # Attached since the plan: planned again at the next pass.
            entry.update(step=None, state=drains.PENDING, checksum=None)
            return
        try:
            self.volumes.migrate_volume(ctxt, entry['volume_id'],
                                        drain['target_pool'])
        except Exception as exc:
            entry['error'] = exception.safe_message(exc)

    @staticmethod
    def _compare(entry: dict) -> None:
        before, after = entry['checksum'], entry['after']
        if before == after:
            entry.update(state=drains.DONE, check=(
                "sha256 %s before Cinder's copy and after" % after))
            return
        entry.update(state=drains.FAILED, reason=(
            "Cinder's copy differs from the volume it moved: sha256 %s "
            'before, %s after' % (before, after)))
        LOG.error('Drain: volume %s: %s', entry['volume_id'],
                  entry['reason'])

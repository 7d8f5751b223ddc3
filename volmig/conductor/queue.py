"""Concurrency caps on volume migrations, and the queue they fill.

Two caps, as Storage vMotion has: per compute host (the agent announces
its ``[compute] max_concurrent_volume_migrations``) and cluster-wide
(``[conductor] max_concurrent_volume_migrations``). They count volumes,
not attachments: the sibling migrations of a shared volume are one move,
so they are never held back once one of them runs (holding them could
deadlock a cap smaller than the volume's attachment count).

A start over a cap is recorded ``queued``; no agent hears of it. When a
migration ends, queued ones are started oldest first, each as soon as
its caps allow, and the caller's ``start`` sees it ``started``.

The count and the record it decides are one critical section of this
conductor. Several conductors may each admit one more start than a cap
allows in the same instant; the next end settles it.
"""

import threading

import futurist
from oslo_concurrency import lockutils
from oslo_log import log as logging

from volmig import concurrency
from volmig import context as volmig_context
from volmig import exception
from volmig import owners
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conductor import start
from volmig.conf import CONF
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)

_LOCK = 'volume-migration-caps'
CAP_OPTION = 'max_concurrent_volume_migrations'


def holding_cap(running: list[dict], host: str, volume_id: str,
                host_cap: int, cluster_cap: int) -> str | None:
    """Which cap holds a start back, given the migrations running."""
    if any(m['volume_id'] == volume_id for m in running):
        return None
    on_host = {m['volume_id'] for m in running if m['host'] == host}
    if host_cap and len(on_host) >= host_cap:
        return ('host %s is migrating %d volume(s), its cap ([compute] %s)'
                % (host, len(on_host), CAP_OPTION))
    everywhere = {m['volume_id'] for m in running}
    if cluster_cap and len(everywhere) >= cluster_cap:
        return ('the cluster is migrating %d volume(s), its cap '
                '([conductor] %s)' % (len(everywhere), CAP_OPTION))
    return None


def host_cap(service: dict) -> int:
    """The cap a compute service announces."""
    return int(service['capabilities'].get(CAP_OPTION) or 0)


def capped(service: dict) -> bool:
    return bool(CONF.conductor.max_concurrent_volume_migrations
                or host_cap(service))


def caps_lock():
    return lockutils.lock(_LOCK)


def reason_to_queue(ctxt, service: dict, volume_id: str) -> str | None:
    """Call under ``caps_lock``; None when a start on ``service``'s
    host may go on now."""
    running = db.migration_get_all(
        ctxt, status=states.IN_PROGRESS - {states.QUEUED})
    return holding_cap(running, service['host'], volume_id,
                       host_cap(service),
                       CONF.conductor.max_concurrent_volume_migrations)


class MigrationQueue:
    """Starts queued migrations as the caps allow, one at a time."""

    def __init__(self, migrations, compute_api, host: str):
        self.migrations = migrations
        self.host = host
        self.compute_api = compute_api
        self._executor = futurist.ThreadPoolExecutor(max_workers=1)
        self._wanted = threading.Event()

    def stop(self) -> None:
        concurrency.stop_executor(self._executor)

    def kick(self) -> None:
        """A slot may be free: look at the queue soon, off the caller's
        thread (the caller may be an agent's report)."""
        if not self._wanted.is_set():
            self._wanted.set()
            try:
                self._executor.submit(self.dispatch)
            except RuntimeError:
                pass  # stopping: the next conductor looks at the queue

    def dispatch(self) -> None:
        self._wanted.clear()
        ctxt = volmig_context.get_admin_context()
        for migration in db.migration_get_all(ctxt, status=states.QUEUED):
            try:
                self._try_start(ctxt, migration)
            except Exception:
                LOG.exception('Could not start queued volume migration %s',
                              migration['id'])

    def _try_start(self, ctxt, migration: dict) -> None:
        # The agent announces whether it answers with a result.
        answers = self.compute_api.can_send_version(
            compute_rpcapi.OWNER_VERSION)
        service = service_db.get(ctxt, compute_rpcapi.BINARY,
                                 migration['host'])
        with caps_lock():
            reason = reason_to_queue(ctxt, service, migration['volume_id'])
            if reason:
                if reason != migration['queued_reason']:
                    db.migration_update(ctxt, migration['id'],
                                        {'queued_reason': reason},
                                        expected_status=states.QUEUED)
                return
            # This conductor owns the start while it waits on the agent.
            values = ({'status': states.STARTING, 'owner': owners.identity(
                conductor_rpcapi.BINARY, self.host)} if answers
                else {'status': states.ACCEPTED})
            try:
                migration = db.migration_update(
                    ctxt, migration['id'], dict(values, queued_reason=None),
                    expected_status=states.QUEUED)
            except exception.InvalidMigrationState:
                return  # cancelled meanwhile, or another conductor's now
        self.migrations.recorded(ctxt, migration, states.QUEUED)
        LOG.info('Volume migration %s leaves the queue', migration['id'])
        bdm = instances_db.bdm_get_by_attachment(
            ctxt, migration['src_attachment_id'])
        try:
            start.run(ctxt, self.compute_api, self.migrations, migration,
                      bdm)
        except exception.VolmigException as exc:
            LOG.warning('Queued volume migration %(id)s did not start: '
                        '%(reason)s', {'id': migration['id'],
                                       'reason': exc.message})

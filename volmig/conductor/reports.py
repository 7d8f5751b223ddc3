"""What the API and the agents report of a migration: each report moves
its record along the state machine, in one compare-and-swap on the status
in the transaction of the records its effect changes.

A repeated report (an agent that restarted) is a no-op; one the state
machine has no edge for is refused (``InvalidMigrationState``). Each
status recorded, whoever asked for it, is logged and sent as a
``volume_migration.update`` notification once it is committed
(``recorded``).
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import exception
from volmig import notifications
from volmig import states
from volmig.conductor import rules
from volmig.conductor import views
from volmig.db import api as db
from volmig.db import instances as instances_db

LOG = logging.getLogger(__name__)

present = views.present


class MigrationReports:

    def __init__(self, volume_api, on_end=lambda: None,
                 notifier: notifications.Notifier | None = None):
        self.volume_api = volume_api
        # Called when a migration ends: its cap slot is free.
        self._on_end = on_end
        # What sends volume_migration.update; none, none is sent (a
        # conductor's parts built alone, in tests and benchmarks).
        self.notifier = notifier

    def recorded(self, ctxt, migration: dict, old_status: str | None) -> None:
        """A status recorded and committed (``old_status`` None: a new
        migration): logged, and sent as ``volume_migration.update``, at
        priority ERROR with its phase and reason for a failure."""
        failed = migration['status'] == states.ERROR
        if failed:
            LOG.error('Volume migration %(id)s of server %(instance)s '
                      'failed while %(phase)s: %(reason)s',
                      {'id': migration['id'],
                       'phase': migration['error_phase'],
                       'reason': migration['error_reason'],
                       'instance': migration['instance_uuid']})
        elif old_status is not None:
            # A new migration's line, with its mode and volume, is the
            # start's own (MigrationConductor._begin).
            LOG.info('Volume migration %(id)s of server %(instance)s is '
                     '%(status)s', {'id': migration['id'],
                                    'status': migration['status'],
                                    'instance': migration['instance_uuid']})
        if self.notifier is None:
            return
        data = dict(notifications.migration_data(migration),
                    old_status=old_status)
        if failed:
            data.update(error_phase=migration['error_phase'],
                        error_reason=migration['error_reason'])
        self.notifier.notify(ctxt, notifications.MIGRATION, 'update', data,
                             error=failed)

    def started(self, ctxt, migration_id: str, pauses: dict) -> dict:
        """The agent stopped every write to src; the start's owner is
        done with it."""
        return self._move(ctxt, migration_id, {states.STARTING},
                          states.STARTED, pauses, owner=None)

    def release(self, ctxt, migration_id: str) -> None:
        """The start's owner stopped waiting on its agent (the call timed
        out): the migration is the healer's to reconcile from now on."""
        try:
            db.migration_update(ctxt, migration_id, {'owner': None},
                                expected_status=states.STARTING)
        except exception.InvalidMigrationState:
            pass  # it moved on meanwhile: nothing is left to hand over

    @db.rereads
    def switched(self, ctxt, migration_id: str, pauses: dict) -> dict:
        """The guest is on dst: src may be released.

        dst's attachment is marked attached first, as block storage ends a
        move once it sees ``src_released`` (a repeated report returns
        early; one after a failure is refused, and its recovery decides);
        the mapping takes it in the transaction that records it.
        """
        current = db.migration_get(ctxt, migration_id)
        if not rules.check_can_switch(current):
            return present(current)
        dst = self.volume_api.attachment_get(ctxt,
                                             current['dst_attachment_id'])
        self.volume_api.attachment_complete(ctxt, dst['id'])
        with db.transaction(ctxt):
            migration = self._move(ctxt, migration_id, {states.COMPLETING},
                                   states.SRC_RELEASED, pauses,
                                   announce=False)
            self._repoint_to(ctxt, current, dst)
        self.recorded(ctxt, migration, states.COMPLETING)
        return migration

    def job_ended(self, ctxt, migration_id: str, status: str,
                  pauses: dict) -> dict:
        """The agent's job (a commit) ended the migration in ``status``."""
        sources = {old for old, end in states.JOB_ENDS.items()
                   if end == status}
        if not sources:
            raise exception.InvalidInput(
                field='status', reason='a job cannot end in %r' % status)
        return self._move(ctxt, migration_id, sources, status, pauses)

    def set_status(self, ctxt, migration_id: str, status: str,
                   pauses: dict | None = None) -> dict:
        """What agents older than conductor RPC 1.3 report."""
        if status == states.SRC_RELEASED:
            return self.switched(ctxt, migration_id, pauses or {})
        if status == states.COMMITTING:
            return self.report_progress(ctxt, migration_id, 0, 0)
        current = db.migration_get(ctxt, migration_id)
        return self._move(ctxt, migration_id, {current['status']}, status,
                          pauses or {})

    @staticmethod
    def _first_move(ctxt, migration_id: str, sources: set, status: str,
                    pauses: dict | None, values: dict) -> dict | None:
        """``started`` in one statement: a migration not started yet has
        no pauses to merge (but an older agent's: None, the caller reads)."""
        if len(sources) != 1 or not sources <= states.INITIAL:
            return None
        try:
            return db.migration_update(
                ctxt, migration_id,
                dict(values, status=status,
                     **({'pauses_ms': pauses} if pauses else {})),
                expected_status=next(iter(sources)),
                still_null=('pauses_ms',) if pauses else ())
        except exception.InvalidMigrationState:
            return None

    @db.rereads
    def _move(self, ctxt, migration_id: str, sources: set, status: str,
              pauses: dict | None, announce: bool = True, **values) -> dict:
        """One report's move; ``announce`` False: the caller's transaction
        goes on, and it calls ``recorded`` once it is committed."""
        with db.transaction(ctxt):
            migration = self._first_move(ctxt, migration_id, sources, status,
                                         pauses, values)
            old = next(iter(sources))
            if migration is None:
                current = db.migration_get(ctxt, migration_id)
                old = current['status']
                if current['status'] == status:
                    # A repeated report (an agent that restarted): no-op.
                    return present(current)
                if current['status'] not in sources:
                    raise exception.InvalidMigrationState(
                        action='move to %s' % status,
                        migration_id=migration_id, status=current['status'])
                values['status'] = status
                if pauses:
                    values['pauses_ms'] = dict(current['pauses_ms'] or {},
                                               **pauses)
                migration = db.migration_update(
                    ctxt, migration_id, values,
                    expected_status=current['status'])
            if status in states.TERMINAL:
                self._unlock_instance(ctxt, migration)
        if status in states.TERMINAL:
            self._on_end()
        if announce:
            self.recorded(ctxt, migration, old)
        return present(migration)

    @staticmethod
    def _repoint_to(ctxt, migration: dict, dst: dict) -> None:
        """The mapping keeps its volume id and takes dst's attachment."""
        instances_db.bdm_update_by_attachment(
            ctxt, migration['src_attachment_id'], {
                'attachment_id': dst['id'],
                'connection_info': dst['connection_info']})

    @db.rereads
    def report_progress(self, ctxt, migration_id: str, bytes_done: int,
                        bytes_total: int) -> dict:
        """A job's progress; also the agent's word that it is alive."""
        with db.transaction(ctxt):
            current = db.migration_get(ctxt, migration_id)
            # Never backwards (the gate keeps the greater figure).
            values: dict = {'bytes_done': bytes_done,
                            'bytes_total': bytes_total}
            if current['status'] == states.SRC_RELEASED:
                # The first report of the commit job.
                values.update(status=states.COMMITTING,
                              job_started_at=timeutils.utcnow())
            migration = db.migration_update(
                ctxt, migration_id, values,
                expected_status=current['status'])
        if migration['status'] != current['status']:
            self.recorded(ctxt, migration, current['status'])
        return present(migration)

    @db.rereads
    def fail(self, ctxt, migration_id: str, reason: str,
             recovery_needed: bool) -> dict:
        current = db.migration_get(ctxt, migration_id)
        if current['status'] in states.TERMINAL:
            LOG.warning('Volume migration %(id)s is already %(status)s; '
                        'not recording failure: %(reason)s',
                        {'id': migration_id, 'status': current['status'],
                         'reason': reason})
            return present(current)
        with db.transaction(ctxt):
            migration = db.migration_update(
                ctxt, migration_id,
                {'status': states.ERROR, 'error_phase': current['status'],
                 'error_reason': reason, 'recovery_needed': recovery_needed,
                 'owner': None},
                expected_status=current['status'])
            self._unlock_instance(ctxt, migration)
        self._on_end()
        self.recorded(ctxt, migration, current['status'])
        return present(migration)

    @db.retried
    def recovered(self, ctxt, migration_id: str, side: str) -> dict:
        """A failed migration's guest is whole again, on ``side``.

        On dst, the mapping takes dst's attachment as a switch would.
        """
        current = db.migration_get(ctxt, migration_id)
        if not current['recovery_needed']:
            return present(current)
        dst = None
        if side == 'dst':
            dst = self.volume_api.attachment_get(
                ctxt, current['dst_attachment_id'])
            # Before the record says recovered, as a switch does.
            self.volume_api.attachment_complete(ctxt, dst['id'])
        with db.transaction(ctxt):
            bdm = instances_db.bdm_get_by_volume(
                ctxt, current['instance_uuid'], current['volume_id'])
            if dst is not None and bdm['attachment_id'] != dst['id']:
                self._repoint_to(ctxt, current, dst)
            migration = db.migration_update(ctxt, migration_id, {
                'recovery_needed': False,
                'error_reason': '%s Recovered: the guest is on %s.' % (
                    current['error_reason'], side)})
        LOG.warning('Volume migration %(id)s: recovered, the guest of '
                    'server %(instance)s is on %(side)s',
                    {'id': migration_id, 'side': side,
                     'instance': current['instance_uuid']})
        return present(migration)

    @staticmethod
    def _unlock_instance(ctxt, migration: dict) -> None:
        try:
            instances_db.instance_update(
                ctxt, migration['instance_uuid'], {'task_state': None},
                expected_task_state=states.TASK_VOLUME_MIGRATING, fetch=False)
        except (exception.InstanceInvalidState, exception.InstanceNotFound):
            LOG.warning('Server %s was not locked by volume migration %s',
                        migration['instance_uuid'], migration['id'])

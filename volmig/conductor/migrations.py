"""The conductor's side of volume migrations: validate, record, heal.

Every status change is decided here and written through the one gate
(``db.migration_update``), each before the work it announces.
"""

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from volmig import exception
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import destinations
from volmig.conductor import queue
from volmig.conductor import rules
from volmig.conductor import views
from volmig.db import api as db
from volmig.db import locks
from volmig.db import starts

LOG = logging.getLogger(__name__)

# A start repeated in these statuses returns the migration it started.
_STARTED_ALREADY = frozenset({states.STARTED}) | states.COMPLETE_REQUESTED


# The public view of a migration, as every answer gives it.
present = views.present


class MigrationConductor:

    def __init__(self, volume_api, on_end=lambda: None):
        self.volume_api = volume_api
        # Called when a migration ends: its cap slot is free.
        self._on_end = on_end

    def _latest(self, ctxt, src_attachment_id: str, action: str) -> dict:
        """The attachment's latest migration, for cancel and complete."""
        migration = db.migration_get_latest_by_src_attachment(
            ctxt, src_attachment_id)
        if migration is None:
            db.bdm_get_by_attachment(ctxt, src_attachment_id)
            raise exception.InvalidMigrationState(
                action=action, migration_id='of attachment %s'
                % src_attachment_id, status='not started')
        return migration

    def begin(self, ctxt, src_attachment_id: str,
              starting: bool = False, owner: str | None = None) -> dict:
        """Validate a start and record it.

        With ``starting`` the caller sends the start to the agent at once,
        so the record is ``starting`` from its first commit, owned by
        ``owner`` (volmig.owners); otherwise it is ``accepted`` and the
        agent reports ``starting`` (RPC < 1.3).
        Returns ``{'migration', 'bdm', 'created'}``; ``created`` is False
        when the start was already done (the call is idempotent).
        """
        found = starts.context(ctxt, src_attachment_id,
                               compute_rpcapi.BINARY)
        latest = found['latest']
        if latest and latest['status'] in _STARTED_ALREADY:
            return {'migration': present(latest), 'bdm': None,
                    'created': False}
        # Read before the decision's transaction, as no lock is held across
        # a call to another service (what it misses, the decision sees in
        # the mappings: rules.check_attachments_seen): the volume the
        # attachment is on, which a complete onto another volume's
        # attachment may have changed; the records keep the mapping's.
        volume = self.volume_api.volume_of_attachment(
            ctxt, found['bdm']['volume_id'], found['bdm']['attachment_id'])
        if not queue.capped(found['service']):
            return self._begin(ctxt, starting, owner, found, volume)
        with queue.caps_lock():
            return self._begin(ctxt, starting, owner, found, volume,
                               capped=True)

    @db.retried
    def _begin(self, ctxt, starting: bool, owner: str | None, found: dict,
               volume: dict, capped: bool = False) -> dict:
        bdm, instance, service = (found['bdm'], found['instance'],
                                  found['service'])
        with db.transaction(ctxt) as session:
            # An attach checks under the same lock once it has recorded
            # its mapping: one of the two sees the other (volmig.db.locks).
            volume_id = bdm['volume_id']
            locks.lock_volume(session, volume_id)
            rules.check_no_other_migration(
                instance, bdm['attachment_id'], volume,
                db.migrations_in_progress(ctxt, volume_id))
            attached = starts.attached_servers(ctxt, volume_id)
            rules.check_attachments_seen(volume, attached)
            mode = rules.choose_migration_mode(
                instance, volume, attached, service['capabilities'])
            held = capped and queue.reason_to_queue(ctxt, service,
                                                    volume_id)
            status = (states.QUEUED if held else
                      states.STARTING if starting else states.ACCEPTED)
            try:
                migration = starts.record(ctxt, {
                    'uuid': uuidutils.generate_uuid(),
                    'instance_uuid': instance['uuid'],
                    'volume_id': volume_id,
                    'src_attachment_id': bdm['attachment_id'],
                    'host': instance['host'], 'mode': mode,
                    'project_id': instance['project_id'],
                    'exclusive': len(volume['attachments']) <= 1,
                    'status': status, 'queued_reason': held or None,
                    'owner': owner if status == states.STARTING else None})
            except exception.InstanceInvalidState as exc:
                raise exception.MigrationInProgress(
                    what='server %s' % instance['uuid'],
                    reason=exc.message)
        LOG.info('Volume migration %(id)s %(status)s (%(mode)s) for volume '
                 '%(volume)s of server %(instance)s%(held)s',
                 {'id': migration['id'], 'mode': mode, 'status': status,
                  'held': ': %s' % held if held else '',
                  'volume': volume['id'], 'instance': instance['uuid']})
        return {'migration': present(migration), 'bdm': bdm, 'created': True}

    def accept_cancel(self, ctxt, src_attachment_id: str) -> dict:
        """Returns ``{'migration', 'bdm', 'send'}``."""
        migration = self._latest(ctxt, src_attachment_id, 'cancel')
        if migration['status'] == states.QUEUED:
            # No agent has heard of it: it simply ends.
            migration = self._move(ctxt, migration['id'], {states.QUEUED},
                                   states.CANCELLED, None)
            return {'migration': migration, 'bdm': None, 'send': False}
        first = rules.check_can_cancel(migration)
        if first:
            migration = db.migration_update(
                ctxt, migration['id'],
                {'status': states.CANCELLING,
                 'job_started_at': timeutils.utcnow()},
                expected_status=states.STARTED)
        bdm = db.bdm_get_by_attachment(ctxt, src_attachment_id)
        # Asked again while cancelling, it is sent again, as a complete
        # is: its conductor may have died before volmig-api cast it. An
        # agent merging already ends the repeat with that job.
        send = first or migration['status'] == states.CANCELLING
        return {'migration': present(migration), 'bdm': bdm, 'send': send}

    def accept_complete(self, ctxt, src_attachment_id: str,
                        dst_attachment_id: str) -> dict:
        """Record the complete and connect dst, unless block storage did:
        ``{'migration', 'bdm', 'dst_connection_info', 'send'}``."""
        migration = self._latest(ctxt, src_attachment_id, 'complete')
        first = rules.check_can_complete(migration, dst_attachment_id)
        if not first and migration['status'] != states.COMPLETING:
            return {'migration': present(migration), 'send': False,
                    'bdm': None, 'dst_connection_info': None}
        bdm = db.bdm_get_by_attachment(ctxt, src_attachment_id)
        if first:
            migration, dst = self._record_complete(ctxt, migration, bdm,
                                                   dst_attachment_id)
        else:
            # Asked again before the agent reported the switch, it is sent
            # again (its conductor may have died before it was cast): the
            # agent acts only while it is completing and runs no job of it.
            dst = destinations.dst_to_send(self.volume_api, ctxt,
                                       dst_attachment_id, migration['host'],
                                       bdm['attach_mode'])
        return {'migration': present(migration), 'bdm': bdm, 'send': True,
                'dst_connection_info': dst['connection_info']}

    def _record_complete(self, ctxt, migration, bdm, dst_attachment_id):
        dst = destinations.checked_dst(self.volume_api, ctxt, migration,
                                   dst_attachment_id)
        # The compare-and-swap before any other change: a complete that
        # loses to a cancel, or to another complete, changes nothing.
        migration = db.migration_update(
            ctxt, migration['id'], {'status': states.COMPLETING,
                                    'dst_attachment_id': dst_attachment_id},
            expected_status=states.STARTED)
        try:
            return migration, destinations.connect_dst(
                self.volume_api, ctxt, dst, migration['host'],
                bdm['attach_mode'])
        except Exception:
            # No agent has heard of this complete yet: back to started.
            db.migration_update(ctxt, migration['id'], {
                'status': states.STARTED, 'dst_attachment_id': None},
                expected_status=states.COMPLETING)
            raise

    def get(self, ctxt, migration_ref: str) -> dict:
        """By migration id, or the latest one of a source attachment."""
        try:
            return present(db.migration_get(ctxt, migration_ref))
        except exception.MigrationNotFound:
            latest = db.migration_get_latest_by_src_attachment(
                ctxt, migration_ref)
            if latest is None:
                raise
            return present(latest)

    def get_all(self, ctxt, filters: dict, **page) -> list[dict]:
        return [present(m) for m in db.migration_get_all(ctxt, **filters,
                                                         **page)]

    # What the API and the agents report. Each is one compare-and-swap on
    # the status, in the transaction of the records its effect changes.

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

    @db.retried
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
                                   states.SRC_RELEASED, pauses)
            self._repoint_to(ctxt, current, dst)
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

    @db.retried
    def _move(self, ctxt, migration_id: str, sources: set, status: str,
              pauses: dict | None, **values) -> dict:
        with db.transaction(ctxt):
            migration = self._first_move(ctxt, migration_id, sources, status,
                                         pauses, values)
            if migration is None:
                current = db.migration_get(ctxt, migration_id)
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
        LOG.info('Volume migration %(id)s of server %(instance)s is '
                 '%(status)s', {'id': migration_id, 'status': status,
                                'instance': migration['instance_uuid']})
        return present(migration)

    @staticmethod
    def _repoint_to(ctxt, migration: dict, dst: dict) -> None:
        """The mapping keeps its volume id and takes dst's attachment."""
        bdm = db.bdm_get_by_attachment(ctxt, migration['src_attachment_id'])
        db.bdm_update(ctxt, bdm['id'], {
            'attachment_id': dst['id'],
            'connection_info': dst['connection_info']})

    @db.retried
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
            return present(db.migration_update(
                ctxt, migration_id, values,
                expected_status=current['status']))

    @db.retried
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
        LOG.error('Volume migration %(id)s of server %(instance)s failed '
                  'while %(phase)s: %(reason)s',
                  {'id': migration_id, 'phase': current['status'],
                   'reason': reason, 'instance': current['instance_uuid']})
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
            bdm = db.bdm_get_by_volume(ctxt, current['instance_uuid'],
                                       current['volume_id'])
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
            db.instance_update(
                ctxt, migration['instance_uuid'], {'task_state': None},
                expected_task_state=states.TASK_VOLUME_MIGRATING, fetch=False)
        except (exception.InstanceInvalidState, exception.InstanceNotFound):
            LOG.warning('Server %s was not locked by volume migration %s',
                        migration['instance_uuid'], migration['id'])

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
from volmig.conductor import reports
from volmig.conductor import rules
from volmig.conductor import views
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import locks
from volmig.db import starts

LOG = logging.getLogger(__name__)

# A start repeated in these statuses returns the migration it started.
_STARTED_ALREADY = frozenset({states.STARTED}) | states.COMPLETE_REQUESTED


# The public view of a migration, as every answer gives it.
present = views.present


class MigrationConductor(reports.MigrationReports):
    """What block storage asks of a migration (start, cancel, complete),
    and what it reads; the reports that move it on are the base's."""

    def _latest(self, ctxt, src_attachment_id: str, action: str) -> dict:
        """The attachment's latest migration, for cancel and complete."""
        migration = db.migration_get_latest_by_src_attachment(
            ctxt, src_attachment_id)
        if migration is None:
            instances_db.bdm_get_by_attachment(ctxt, src_attachment_id)
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
        self.recorded(ctxt, migration, None)
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
            self.recorded(ctxt, migration, states.STARTED)
        bdm = instances_db.bdm_get_by_attachment(ctxt, src_attachment_id)
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
        bdm = instances_db.bdm_get_by_attachment(ctxt, src_attachment_id)
        if first:
            migration, dst = self._record_complete(ctxt, migration, bdm,
                                                   dst_attachment_id)
        else:
            # Asked again before the agent reported the switch, it is sent
            # again (its conductor may have died before it was cast): the
            # agent acts only while it is completing and runs no job of it.
            dst = destinations.dst_to_send(self.volume_api, ctxt,
                                           dst_attachment_id,
                                           migration['host'],
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
            connected = destinations.connect_dst(
                self.volume_api, ctxt, dst, migration['host'],
                bdm['attach_mode'])
            self.recorded(ctxt, migration, states.STARTED)
            return migration, connected
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

"""How the compute agent settles a migration against its guest after a
crash, at start-up or when the conductor asks: it finishes what was past
the switch and rolls back what was not, from where the driver finds the
guest (``migration_recover``).
"""

import typing

from oslo_concurrency import lockutils
from oslo_log import log as logging

from volmig import notifications
from volmig import states

LOG = logging.getLogger(__name__)



class Reconciliation:
    """The reconciling part of ``migrations.MigrationRunner``."""

    if typing.TYPE_CHECKING:
        host: str
        driver: typing.Any
        conductor: typing.Any
        jobs: typing.Any
        _answered_starts: set[str]

        def _instance(self, migration) -> dict: ...

        def _tell(self, report, ctxt, migration_id, *args): ...

        def _fail(self, ctxt, migration, exc, recovery_needed,
                  event) -> None: ...

        def _merge_back(self, ctxt, migration, bdm, event, finish): ...

        def _finisher(self, ctxt, migration, final_status): ...

        def _switch(self, ctxt, migration, bdm, dst_connection_info): ...

        def _commit(self, ctxt, migration, bdm): ...

        def _sync_power_state(self, ctxt, migration) -> None: ...

    def reconcile(self, ctxt, migration, bdm, dst_connection_info):
        try:
            with lockutils.lock('instance-%s' % migration['instance_uuid']):
                if self._still_to_reconcile(ctxt, migration):
                    self._reconcile(ctxt, migration, bdm,
                                    dst_connection_info)
        except Exception:
            LOG.exception('Could not reconcile volume migration %s; the '
                          'conductor asks again when it stalls',
                          migration['id'])

    def _still_to_reconcile(self, ctxt, migration) -> bool:
        """Whether the request is still current, now that this agent holds
        the server: the work list may predate a step taken since."""
        if (migration['status'] == states.STARTING
                and migration['id'] in self._answered_starts):
            # Answered by this process: its caller records it.
            return False
        current = self.conductor.migration_get(ctxt, migration['id'])
        return ((current['status'], current['recovery_needed'])
                == (migration['status'], migration['recovery_needed']))

    def _reconcile(self, ctxt, migration, bdm, dst_connection_info):
        """Finish or roll back one migration, from where the guest is."""
        if self.jobs.running(migration['id']):
            # Its job is alive here: that is the answer.
            self.conductor.migration_report_progress(ctxt, migration['id'],
                                                     0, 0)
            return
        if bdm is None:
            LOG.error('Volume migration %s has no block device mapping '
                      'left to reconcile', migration['id'])
            return
        status = migration['status']
        LOG.warning('Reconciling volume migration %(id)s (%(status)s)',
                    {'id': migration['id'], 'status': status},
                    instance_uuid=migration['instance_uuid'])
        side = self.driver.migration_recover(
            self._instance(migration), bdm, migration, dst_connection_info)
        if status == states.ERROR:
            self._recover_failed(ctxt, migration, bdm, side)
        elif status == states.STARTING:
            reason = ('the compute agent on %s stopped before it answered '
                      'the start; the guest is back on src' % self.host)
            self._merge_back(
                ctxt, migration, bdm, notifications.MIGRATION_START,
                lambda job: self._fail(ctxt, migration, reason, False,
                                       notifications.MIGRATION_START))
        elif status == states.STARTED:
            # Nothing to do until the block-storage service asks; say that
            # the agent still holds the migration.
            self.conductor.migration_report_progress(ctxt, migration['id'],
                                                     0, 0)
            self._sync_power_state(ctxt, migration)
        elif status == states.CANCELLING:
            self._merge_back(ctxt, migration, bdm,
                             notifications.MIGRATION_CANCEL,
                             self._finisher(ctxt, migration,
                                            states.CANCELLED))
        elif status == states.COMPLETING and side != 'dst':
            self._switch(ctxt, migration, bdm, dst_connection_info)
        elif status == states.COMPLETING:
            self._tell(self.conductor.migration_switched, ctxt,
                       migration['id'], {})
            self._commit(ctxt, migration, bdm)
        elif status in (states.SRC_RELEASED, states.COMMITTING):
            self._commit(ctxt, migration, bdm)

    def _recover_failed(self, ctxt, migration, bdm, side):
        """A failed migration left the guest off src: make it whole."""
        def recovered(job):
            self._tell(self.conductor.migration_recovered, ctxt,
                       migration['id'], side)
            self._sync_power_state(ctxt, migration)
        instance = self._instance(migration)
        try:
            if side == 'dst':
                job = self.driver.migration_commit(instance, bdm, migration)
            else:
                job = self.driver.migration_cancel(instance, bdm, migration)
        except Exception:
            LOG.exception('Volume migration %s: recovery failed; it needs '
                          'an operator', migration['id'])
            return
        def report(progress):
            if progress.finished:
                recovered(job)

        def on_error(exc):
            LOG.error('Volume migration %s: recovery failed: %s',
                      migration['id'], exc)
        self.jobs.submit(migration['id'], job, report, on_error)

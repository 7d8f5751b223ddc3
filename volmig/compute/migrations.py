"""The compute agent's side of volume migrations.

Start, cancel and complete drive the driver and report how their jobs
end to the conductor, which records every status (``reconciliation``
settles a migration after a crash).
"""

from oslo_log import log as logging

from volmig import exception
from volmig import metrics
from volmig import notifications
from volmig import rpc
from volmig import states
from volmig.compute import reconciliation

LOG = logging.getLogger(__name__)

START = notifications.MIGRATION_START
CANCEL = notifications.MIGRATION_CANCEL
COMPLETE = notifications.MIGRATION_COMPLETE
# The notification a job that ends in this status belongs to.
_EVENTS = {states.CANCELLED: CANCEL, states.COMPLETED: COMPLETE}


class MigrationRunner(reconciliation.Reconciliation):
    """One agent's migrations; the manager serializes them per server."""

    def __init__(self, host: str, driver, conductor, jobs, notifier):
        self.host = host
        self.driver = driver
        self.conductor = conductor
        self.jobs = jobs
        self.notifier = notifier
        # Migrations being merged on disk after QEMU died: a failure there
        # is final.
        self._merging_on_disk: set[str] = set()
        # Starts this process answered: never rolled back as unanswered.
        self._answered_starts: set[str] = set()

    def _instance(self, migration):
        return {'uuid': migration['instance_uuid'], 'host': self.host}

    @staticmethod
    def _tell(report, ctxt, migration_id, *args):
        """A step's end the conductor must hear: asked again while the
        conductor is away (a restart, an upgrade). Left unheard, the
        guest would wait on an overlay for the stall timeout's
        reconciliation; heard twice, it is the same record."""
        return rpc.until_answered(
            lambda: report(ctxt, migration_id, *args),
            'Volume migration %s: %s' % (migration_id, report.__name__))

    def _fail(self, ctxt, migration, exc, recovery_needed, event):
        message = exception.safe_message(exc)
        self.notifier.notify(ctxt, event, 'error',
                             notifications.migration_data(migration), exc)
        self._tell(self.conductor.migration_fail, ctxt, migration['id'],
                   message, recovery_needed)

    def start(self, ctxt, migration, bdm):
        """Stop every write to src; returns ``{'pauses'}``.

        A caller older than 1.3 recorded the migration as ``accepted`` and
        expects the agent to report the start itself.
        """
        LOG.info('Starting volume migration %s', migration['id'],
                 instance_uuid=migration['instance_uuid'])
        legacy = migration['status'] == states.ACCEPTED
        self.notifier.notify(ctxt, START, 'start',
                             notifications.migration_data(migration))
        try:
            pauses = self.driver.migration_start(self._instance(migration),
                                                 bdm, migration)
        except Exception as exc:
            # The driver undoes a failed start, so the guest is on src.
            LOG.exception('Volume migration %s could not start',
                          migration['id'])
            if legacy:
                self._fail(ctxt, migration, exc, False, START)
            else:
                self.notifier.notify(ctxt, START, 'error',
                                     notifications.migration_data(migration),
                                     exc)
            if isinstance(exc, exception.VolmigException):
                raise
            raise exception.DriverError(action='start the migration',
                                        reason=exc)
        metrics.observe_pauses(pauses)
        self.notifier.notify(ctxt, START, 'end', notifications.migration_data(
            dict(migration, status=states.STARTED, pauses_ms=pauses)))
        if legacy:
            return self.conductor.migration_started(ctxt, migration, pauses)
        self._answered_starts.add(migration['id'])
        return {'pauses': pauses}

    def cancel(self, ctxt, migration, bdm):
        LOG.info('Cancelling volume migration %s', migration['id'],
                 instance_uuid=migration['instance_uuid'])
        if self._running_here(migration):
            return
        if not self._still(ctxt, migration):
            return
        self.notifier.notify(ctxt, CANCEL, 'start',
                             notifications.migration_data(migration))
        self._merge_back(ctxt, migration, bdm, CANCEL,
                         self._finisher(ctxt, migration, states.CANCELLED))

    def _running_here(self, migration) -> bool:
        """Whether a job of the migration runs here: a cancel or complete
        asked again (a repeat, a reconciliation) while the first one's
        job runs, or a complete while its refused switch merges the guest
        back, is ended by that job. Checked before asking the conductor,
        which it spares a call."""
        if not self.jobs.running(migration['id']):
            return False
        LOG.info('Volume migration %s: a job of it runs here already',
                 migration['id'])
        return True

    def _still(self, ctxt, migration) -> bool:
        """Whether a cast is still current: one that waited in the queue
        while this agent was down may have been overtaken by the healer.

        Asked until the conductor answers: the cast is the only request
        for its step, and a conductor that died just after sending it
        would otherwise leave the guest on its overlay until the stall
        timeout (measured: 121 s, the conductor killed as it sent a
        complete)."""
        self._answered_starts.discard(migration['id'])
        current = rpc.until_answered(
            lambda: self.conductor.migration_get(ctxt, migration['id']),
            'Volume migration %s: migration_get' % migration['id'])
        if current['status'] == migration['status']:
            return True
        LOG.warning('Ignoring a stale request for volume migration %(id)s: '
                    'it was %(sent)s when sent and is %(now)s now',
                    {'id': migration['id'], 'sent': migration['status'],
                     'now': current['status']})
        return False

    def _merge_back(self, ctxt, migration, bdm, event, finish):
        """Send the guest back to src; ``finish(job)`` once merged."""
        self._drive(ctxt, migration, bdm, self.driver.migration_cancel,
                    event, finish)

    def _drive(self, ctxt, migration, bdm, step, event, finish):
        """Run a driver step's job; a step that fails is ``_failed``."""
        try:
            job = step(self._instance(migration), bdm, migration)
        except Exception as exc:
            LOG.exception('Volume migration %s: %s failed', migration['id'],
                          step.__name__)
            self._failed(ctxt, migration, exc, event)
            return
        self._run_job(ctxt, migration, bdm, job, event, finish)

    def complete(self, ctxt, migration, bdm, dst_connection_info):
        LOG.info('Completing volume migration %s', migration['id'],
                 instance_uuid=migration['instance_uuid'])
        if self._running_here(migration):
            return
        if not self._still(ctxt, migration):
            return
        self.notifier.notify(ctxt, COMPLETE, 'start',
                             notifications.migration_data(migration))
        self._switch(ctxt, migration, bdm, dst_connection_info)

    def _switch(self, ctxt, migration, bdm, dst_connection_info):
        """Put the guest on dst, report it, and commit the overlay."""
        instance = self._instance(migration)
        try:
            pauses = self.driver.migration_switch(instance, bdm, migration,
                                                  dst_connection_info)
        except Exception as exc:
            # A dst that does not fit is refused before anything switches;
            # other failures may strike mid-switch, so ask the guest.
            side = self._side_after_failure(instance, bdm, migration,
                                            dst_connection_info)
            if side != 'dst':
                self._roll_back(ctxt, migration, bdm, exc)
                return
            pauses = {}
        metrics.observe_pauses(pauses)
        self._tell(self.conductor.migration_switched, ctxt, migration['id'],
                   pauses)
        self._commit(ctxt, migration, bdm)

    def _side_after_failure(self, instance, bdm, migration,
                            dst_connection_info) -> str | None:
        try:
            return self.driver.migration_recover(instance, bdm, migration,
                                                 dst_connection_info)
        except Exception:
            LOG.exception('Volume migration %s: cannot tell which volume '
                          'the guest is on', migration['id'])
            return None

    def _commit(self, ctxt, migration, bdm):
        self._drive(ctxt, migration, bdm, self.driver.migration_commit,
                    COMPLETE, self._finisher(ctxt, migration,
                                             states.COMPLETED))

    def _roll_back(self, ctxt, migration, bdm, reason):
        """After a refused switch: merge the overlay back into src."""
        LOG.error('Volume migration %s refused at complete, going back to '
                  'src: %s', migration['id'], reason,
                  instance_uuid=migration['instance_uuid'])

        def finish(job):
            self._fail(ctxt, migration, reason, False, COMPLETE)
        self._merge_back(ctxt, migration, bdm, COMPLETE, finish)

    def _finisher(self, ctxt, migration, final_status):
        def finish(job):
            metrics.observe_pauses(job.pauses)
            ended = self._tell(self.conductor.migration_job_ended, ctxt,
                               migration['id'], final_status,
                               dict(job.pauses))
            self.notifier.notify(ctxt, _EVENTS[final_status], 'end',
                                 notifications.migration_data(ended))
        return finish

    def _run_job(self, ctxt, migration, bdm, job, event, finish):
        """Run a driver job, report its progress, then ``finish(job)``.

        If the job fails because QEMU died under it, the overlay is merged
        on disk by reconciling the migration; other failures are recorded.
        """
        def report(progress):
            if progress.bytes_total:
                try:
                    self.conductor.migration_report_progress(
                        ctxt, migration['id'], progress.bytes_done,
                        progress.bytes_total)
                except rpc.LOST:
                    # A figure, and the next one says more: the job goes
                    # on while the conductor is away.
                    LOG.warning('Volume migration %s: progress not '
                                'recorded, the conductor does not answer',
                                migration['id'])
            if progress.finished:
                finish(job)
                self._sync_power_state(ctxt, migration)

        def on_error(exc):
            self._failed(ctxt, migration, exc, event)

        self.jobs.submit(migration['id'], job, report, on_error)

    def _failed(self, ctxt, migration, exc, event) -> None:
        """A step failed after the guest left src's safety.

        If QEMU died under it, the overlay is merged on disk by
        reconciling the migration; otherwise an operator must look.
        """
        instance = self._instance(migration)
        if (self.driver.get_power_state(instance) == states.POWER_RUNNING
                or migration['id'] in self._merging_on_disk):
            self._fail(ctxt, migration, exc, True, event)
            return
        LOG.warning('The guest of volume migration %s went down under it; '
                    'merging on disk', migration['id'])
        self._merging_on_disk.add(migration['id'])
        try:
            for item in self.conductor.migration_work_for_host(ctxt,
                                                               self.host):
                if item['migration']['id'] == migration['id']:
                    self._reconcile(ctxt, **item)
        finally:
            self._merging_on_disk.discard(migration['id'])

    def _sync_power_state(self, ctxt, migration) -> None:
        instance = self._instance(migration)
        if self.driver.get_power_state(instance) != states.POWER_RUNNING:
            self.conductor.instance_power_changed(
                ctxt, instance['uuid'], states.POWER_SHUTDOWN,
                states.VM_STOPPED)

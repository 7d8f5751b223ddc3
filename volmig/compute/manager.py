"""Server side of the compute agent's RPC API.

Methods mirror ``rpcapi`` one to one. Work on one instance is serialized
by a per-instance lock; outcomes are reported to the conductor, which
records them.
"""

import functools

from oslo_concurrency import lockutils
from oslo_log import log as logging
import oslo_messaging as messaging

from volmig import context
from volmig import exception
from volmig import notifications
from volmig import states
from volmig.compute import drivers
from volmig.compute import jobs
from volmig.compute import rpcapi
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF

LOG = logging.getLogger(__name__)

START = 'volume_migration.start'
CANCEL = 'volume_migration.cancel'
COMPLETE = 'volume_migration.complete'
# The notification a job that ends in this status belongs to.
_EVENTS = {states.CANCELLED: CANCEL, states.COMPLETED: COMPLETE}

expected = messaging.expected_exceptions(exception.VolmigException)


def locked_instance(method):
    """Serialize a method on the instance (or migration's instance)."""

    @functools.wraps(method)
    def wrapper(self, ctxt, **kwargs):
        target = kwargs.get('instance') or kwargs['migration']
        uuid = target.get('instance_uuid') or target['uuid']
        with lockutils.lock('instance-%s' % uuid):
            return method(self, ctxt, **kwargs)
    return wrapper


class ComputeManager:
    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, host: str):
        self.host = host
        self.driver = drivers.load_driver()
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.jobs = jobs.JobRunner(CONF.compute.job_workers,
                                   CONF.compute.job_poll_interval)
        self.notifier = notifications.Notifier('%s:%s' % (rpcapi.BINARY,
                                                          host))

    # Service plumbing.

    def service_record(self) -> tuple[str, dict]:
        version = CONF.compute.announced_rpc_version or rpcapi.RPC_API_VERSION
        return version, self.driver.capabilities

    def periodic_tasks(self):
        return []

    def init_host(self) -> None:
        self.driver.init_host(self.host)
        ctxt = context.get_service_context()
        for migration_id, job, final_status in self.driver.recover_jobs():
            LOG.info('Resuming the job of volume migration %s',
                     migration_id)
            migration = {'id': migration_id}
            self._run_job(ctxt, migration, job, _EVENTS[final_status],
                          self._finisher(ctxt, migration, final_status))

    def cleanup_host(self) -> None:
        self.jobs.stop()
        if CONF.compute.stop_guests_on_exit:
            self.driver.stop_guests()
        self.driver.cleanup_host()

    # Instances.

    @expected
    @locked_instance
    def build_instance(self, ctxt, instance, block_devices):
        data = notifications.instance_data(instance, block_devices=[
            {'volume_id': bdm['volume_id'], 'attach_mode': bdm['attach_mode'],
             'boot_index': bdm['boot_index']} for bdm in block_devices])
        try:
            with self.notifier.around(ctxt, 'instance.create', data):
                self.driver.spawn(instance, block_devices)
        except Exception as exc:
            LOG.exception('Build failed', instance=instance)
            self.conductor.instance_update(ctxt, instance['uuid'], {
                'vm_state': states.VM_ERROR, 'task_state': None})
            raise exception.DriverError(action='build', reason=exc)
        self.conductor.instance_built(ctxt, instance['uuid'],
                                      self.driver.get_power_state(instance))

    @expected
    @locked_instance
    def terminate_instance(self, ctxt, instance):
        self.driver.destroy(instance)
        self.conductor.instance_terminated(ctxt, instance['uuid'])

    def _power_change(self, ctxt, instance, change, vm_state):
        try:
            change()
        finally:
            self.conductor.instance_update(ctxt, instance['uuid'], {
                'power_state': self.driver.get_power_state(instance),
                'vm_state': vm_state, 'task_state': None})

    @expected
    @locked_instance
    def stop_instance(self, ctxt, instance):
        self._power_change(ctxt, instance,
                           lambda: self.driver.power_off(instance),
                           states.VM_STOPPED)

    @expected
    @locked_instance
    def start_instance(self, ctxt, instance, block_devices):
        self._power_change(
            ctxt, instance,
            lambda: self.driver.power_on(instance, block_devices),
            states.VM_ACTIVE)

    @expected
    @locked_instance
    def attach_volume(self, ctxt, instance, bdm, attach_mode='rw'):
        # A 1.0 caller sends no attach_mode; it only knows read/write.
        data = notifications.instance_data(
            instance, volume_id=bdm['volume_id'], attach_mode=attach_mode)
        with self.notifier.around(ctxt, 'instance.volume_attach', data):
            self.driver.attach_volume(instance,
                                      dict(bdm, attach_mode=attach_mode))

    @expected
    @locked_instance
    def detach_volume(self, ctxt, instance, bdm):
        self.driver.detach_volume(instance, bdm)
        self.conductor.volume_detached(ctxt, instance['uuid'],
                                       bdm['volume_id'])

    @expected
    @locked_instance
    def swap_volume(self, ctxt, instance, old_bdm, new_bdm):
        """The legacy swap; the conductor hears how it ended."""
        data = notifications.instance_data(
            instance, old_volume_id=old_bdm['volume_id'],
            new_volume_id=new_bdm['volume_id'],
            attach_mode=old_bdm['attach_mode'])
        self.notifier.notify(ctxt, 'instance.volume_swap', 'start', data)

        def failed(exc):
            self.notifier.notify(ctxt, 'instance.volume_swap', 'error', data,
                                 exc)
            self.conductor.swap_failed(ctxt, instance['uuid'], new_bdm)

        def report(progress):
            if progress.finished:
                self.conductor.volume_swapped(ctxt, instance['uuid'],
                                              old_bdm, new_bdm)
                self.notifier.notify(ctxt, 'instance.volume_swap', 'end',
                                     data)
        try:
            job = self.driver.swap_volume(instance, old_bdm, new_bdm)
        except Exception as exc:
            LOG.exception('Volume swap failed', instance=instance)
            failed(exc)
            raise exception.DriverError(action='swap a volume', reason=exc)
        self.jobs.submit('swap-%s' % new_bdm['attachment_id'], job, report,
                         failed)

    # Volume migrations.

    def _instance(self, migration):
        return {'uuid': migration['instance_uuid'], 'host': self.host}

    def _fail(self, ctxt, migration, exc, recovery_needed, event):
        self.notifier.notify(ctxt, event, 'error',
                             notifications.migration_data(migration), exc)
        self.conductor.migration_fail(ctxt, migration['id'], str(exc),
                                      recovery_needed)

    @expected
    @locked_instance
    def migration_start(self, ctxt, migration, bdm):
        LOG.info('Starting volume migration %s', migration['id'],
                 instance_uuid=migration['instance_uuid'])
        self.notifier.notify(ctxt, START, 'start',
                             notifications.migration_data(migration))
        self.conductor.migration_set_status(ctxt, migration['id'],
                                            states.STARTING)
        try:
            pauses = self.driver.migration_start(self._instance(migration),
                                                 bdm, migration)
        except Exception as exc:
            # The driver undoes a failed start, so the guest is on src.
            self._fail(ctxt, migration, exc, False, START)
            raise
        started = self.conductor.migration_set_status(
            ctxt, migration['id'], states.STARTED, pauses)
        self.notifier.notify(ctxt, START, 'end',
                             notifications.migration_data(started))
        return started

    @expected
    @locked_instance
    def migration_cancel(self, ctxt, migration, bdm):
        LOG.info('Cancelling volume migration %s', migration['id'],
                 instance_uuid=migration['instance_uuid'])
        self.notifier.notify(ctxt, CANCEL, 'start',
                             notifications.migration_data(migration))
        self._merge_back(ctxt, migration, bdm, CANCEL,
                         self._finisher(ctxt, migration, states.CANCELLED))

    def _merge_back(self, ctxt, migration, bdm, event, finish):
        """Send the guest back to src; ``finish(job)`` once merged."""
        try:
            job = self.driver.migration_cancel(self._instance(migration),
                                               bdm, migration)
        except Exception as exc:
            self._fail(ctxt, migration, exc, True, event)
            raise
        self._run_job(ctxt, migration, job, event, finish)

    @expected
    @locked_instance
    def migration_complete(self, ctxt, migration, bdm, dst_connection_info):
        LOG.info('Completing volume migration %s', migration['id'],
                 instance_uuid=migration['instance_uuid'])
        instance = self._instance(migration)
        self.notifier.notify(ctxt, COMPLETE, 'start',
                             notifications.migration_data(migration))
        try:
            pauses = self.driver.migration_switch(instance, bdm, migration,
                                                  dst_connection_info)
        except Exception as exc:
            # The driver checks dst before it switches anything; the guest
            # is still on src, through the overlay, which goes back.
            self._roll_back(ctxt, migration, bdm, exc)
            raise
        self.conductor.migration_set_status(ctxt, migration['id'],
                                            states.SRC_RELEASED, pauses)
        self.conductor.migration_set_status(ctxt, migration['id'],
                                            states.COMMITTING)
        try:
            job = self.driver.migration_commit(instance, bdm, migration)
        except Exception as exc:
            self._fail(ctxt, migration, exc, True, COMPLETE)
            raise
        self._run_job(ctxt, migration, job, COMPLETE,
                      self._finisher(ctxt, migration, states.COMPLETED))

    def _roll_back(self, ctxt, migration, bdm, reason):
        """After a refused switch: merge the overlay back into src."""
        LOG.error('Volume migration %s refused at complete, going back to '
                  'src: %s', migration['id'], reason,
                  instance_uuid=migration['instance_uuid'])

        def finish(job):
            self._fail(ctxt, migration, reason, False, COMPLETE)
        try:
            self._merge_back(ctxt, migration, bdm, COMPLETE, finish)
        except Exception:
            LOG.exception('Volume migration %s could not go back to src',
                          migration['id'])

    def _finisher(self, ctxt, migration, final_status):
        def finish(job):
            ended = self.conductor.migration_set_status(
                ctxt, migration['id'], final_status, dict(job.pauses))
            self.notifier.notify(ctxt, _EVENTS[final_status], 'end',
                                 notifications.migration_data(ended))
        return finish

    def _run_job(self, ctxt, migration, job, event, finish):
        """Run a driver job, report its progress, then ``finish(job)``."""
        def report(progress):
            if progress.bytes_total:
                self.conductor.migration_report_progress(
                    ctxt, migration['id'], progress.bytes_done,
                    progress.bytes_total)
            if progress.finished:
                finish(job)

        def on_error(exc):
            self._fail(ctxt, migration, exc, True, event)

        self.jobs.submit(migration['id'], job, report, on_error)

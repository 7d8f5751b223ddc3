"""Server side of the compute agent's RPC API.

Methods mirror ``rpcapi`` one to one. Work on one instance is serialized
by a per-instance lock. The agent never writes state: calls return their
results, and the ends of asynchronous jobs are reported to the
conductor, which records them.

A method marked ``unsigned`` is one the previous release's conductor and
API call: it serves them unsigned while an upgrade lets such messages in
(``[signing] allow_unsigned``), on this host's records only (``_mine``).
"""

import functools
import time

from oslo_concurrency import lockutils
from oslo_log import log as logging
import oslo_messaging as messaging

from volmig import context
from volmig import exception
from volmig import notifications
from volmig import rpc
from volmig import signing
from volmig import states
from volmig.compute import copies
from volmig.compute import drivers
from volmig.compute import jobs
from volmig.compute import migrations
from volmig.compute import nova_disks
from volmig.compute import rpcapi
from volmig.compute import volumes
from volmig.conf import CONF

LOG = logging.getLogger(__name__)

def locked_instance(method):
    """Serialize a method on the instance (or migration's instance), once
    the records it names are found to be this host's (``_mine``)."""

    @functools.wraps(method)
    def wrapper(self, ctxt, **kwargs):
        target = kwargs.get('instance') or kwargs['migration']
        uuid = self._mine(ctxt, method.__name__, target, kwargs)
        with lockutils.lock('instance-%s' % uuid):
            return method(self, ctxt, **kwargs)
    return wrapper




class ComputeManager:
    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, host: str, conductor):
        """``conductor``: the conductor's RPC client, which the service
        gives its agent (``volmig.service``)."""
        self.host = host
        self.driver = drivers.load_driver()
        self.conductor = conductor
        self.jobs = jobs.JobRunner(CONF.compute.job_workers,
                                   CONF.compute.job_poll_interval,
                                   CONF.compute.progress_report_interval,
                                   CONF.compute.progress_reports_per_job)
        self.notifier = notifications.Notifier('%s:%s' % (rpcapi.BINARY,
                                                          host))
        self.migrations = migrations.MigrationRunner(
            host, self.driver, self.conductor, self.jobs, self.notifier)
        self._reconciled = False
        self._began = time.monotonic()
        self._swaps_to_recover: list[dict] = []
        self._connector: dict = {}
        self.volumes = volumes.VolumeConnector(CONF)
        self.copies = copies.VolumeCopies(CONF, self.volumes)

    def _mine(self, ctxt, method: str, target: dict, kwargs: dict) -> str:
        """The server a message is about, once its records are found to
        be this host's: the server, or the migration, is on this host,
        and every mapping it names is that server's. A controller never
        sends another host's; a message let in unsigned must not."""
        uuid = target.get('instance_uuid') or target['uuid']
        mappings = [kwargs[name] for name in ('bdm', 'old_bdm', 'new_bdm')
                    if kwargs.get(name)] + list(kwargs.get('block_devices')
                                                or ())
        if target.get('host') != self.host or any(
                bdm.get('instance_uuid', uuid) != uuid for bdm in mappings):
            signing.refuse(method, getattr(ctxt, 'sender', None), 'host',
                           'it names records of another host or server')
        return uuid

    # Service plumbing.

    def service_record(self) -> tuple[str, dict]:
        version = CONF.compute.announced_rpc_version or rpcapi.RPC_API_VERSION
        # The conductor holds starts over this host's cap as "queued".
        return version, dict(
            self.driver.capabilities,
            max_concurrent_volume_migrations=(
                CONF.compute.max_concurrent_volume_migrations),
            # Block storage exports volumes to this host by it.
            connector=self._connector)

    def periodic_tasks(self):
        return [(CONF.report_interval, self.reconcile_after_restart),
                (CONF.compute.sync_power_state_interval,
                 self.sync_power_states)]

    def init_host(self) -> None:
        self.driver.power_listener = self._guest_powered_off
        self.driver.init_host(self.host)
        self._connector = self.volumes.properties(self.host)
        # Before serving: later swaps are this process's own.
        self._swaps_to_recover = self.driver.swaps_to_recover()

    def reconcile_after_restart(self) -> None:
        """Once, as soon as the conductor answers: settle every migration
        a previous agent on this host left behind.

        Not in ``init_host``: the agent must not wait for the conductor to
        start serving.
        """
        if self._reconciled:
            return
        ctxt = context.get_service_context()
        try:
            work = self.conductor.migration_work_for_host(
                ctxt, self.host, uptime=time.monotonic() - self._began)
        except messaging.MessagingTimeout:
            LOG.warning('The conductor does not answer yet; reconciling '
                        'the migrations of this host later')
            return
        self._reconciled = True
        for item in work:
            self.migrations.reconcile(ctxt, **item)
        swaps, self._swaps_to_recover = self._swaps_to_recover, []
        for entry in swaps:
            with lockutils.lock('instance-%s' % entry['instance_uuid']):
                self._recover_swap(ctxt, entry)

    def sync_power_states(self) -> None:
        """Record a guest that powered off or died as shut off.

        A server with a task is left to the task, which sees the guest
        itself.
        """
        ctxt = context.get_admin_context()
        try:
            instances = self.conductor.instance_list(ctxt, host=self.host)
        except messaging.MessagingTimeout:
            return
        for instance in instances:
            self._sync_power_state(ctxt, instance)

    def _guest_powered_off(self, instance_uuid: str) -> None:
        """The driver saw a guest power off by itself (QMP SHUTDOWN)."""
        ctxt = context.get_admin_context()
        try:
            instance = self.conductor.instance_get(ctxt, instance_uuid)
        except (exception.InstanceNotFound, messaging.MessagingTimeout):
            return  # deleted meanwhile, or the periodic sync will see it
        self._sync_power_state(ctxt, instance)

    def _sync_power_state(self, ctxt, instance: dict) -> None:
        if (instance['host'] != self.host or instance['task_state']
                or instance['vm_state'] != states.VM_ACTIVE):
            return
        with lockutils.lock('instance-%s' % instance['uuid']):
            power = self.driver.get_power_state(instance)
            if power == states.POWER_SHUTDOWN:
                LOG.warning('The guest is %s; recording the server as '
                            'stopped', power, instance=instance)
                self.conductor.instance_power_changed(
                    ctxt, instance['uuid'], power, states.VM_STOPPED)

    def cleanup_host(self) -> None:
        self.jobs.stop()
        self.copies.stop()
        if CONF.compute.stop_guests_on_exit:
            self.driver.stop_guests()
        self.driver.cleanup_host()

    # Instances.

    @rpc.endpoint(unsigned=True)
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
            self.conductor.instance_build_failed(
                ctxt, instance['uuid'], exception.safe_message(exc))
            raise exception.DriverError(action='build', reason=exc)
        self.conductor.instance_built(ctxt, instance['uuid'],
                                      self.driver.get_power_state(instance))

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def terminate_instance(self, ctxt, instance):
        self.driver.destroy(instance)
        self.conductor.instance_terminated(ctxt, instance['uuid'])

    def _power_change(self, ctxt, instance, change, vm_state):
        try:
            change()
        finally:
            self.conductor.instance_power_changed(
                ctxt, instance['uuid'], self.driver.get_power_state(instance),
                vm_state)

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def stop_instance(self, ctxt, instance):
        self._power_change(ctxt, instance,
                           lambda: self.driver.power_off(instance),
                           states.VM_STOPPED)

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def start_instance(self, ctxt, instance, block_devices):
        self._power_change(
            ctxt, instance,
            lambda: self.driver.power_on(instance, block_devices),
            states.VM_ACTIVE)

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def attach_volume(self, ctxt, instance, bdm, attach_mode='rw'):
        # A 1.0 caller sends no attach_mode; it only knows read/write.
        data = notifications.instance_data(
            instance, volume_id=bdm['volume_id'], attach_mode=attach_mode)
        with self.notifier.around(ctxt, 'instance.volume_attach', data):
            self.driver.attach_volume(instance,
                                      dict(bdm, attach_mode=attach_mode))

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def detach_volume(self, ctxt, instance, bdm):
        try:
            self.driver.detach_volume(instance, bdm)
        except Exception as exc:
            LOG.exception('Detaching volume %s failed', bdm['volume_id'],
                          instance=instance)
            self.conductor.volume_detach_failed(
                ctxt, instance['uuid'], bdm['volume_id'],
                exception.safe_message(exc))
            return
        self.conductor.volume_detached(ctxt, instance['uuid'],
                                       bdm['volume_id'])

    @rpc.endpoint
    def get_console_output(self, ctxt, instance, length=None):
        self._mine(ctxt, 'get_console_output', instance, {})
        return self.driver.get_console_output(instance, length)

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def swap_volume(self, ctxt, instance, old_bdm, new_bdm):
        """The legacy swap; the conductor hears how it ended."""
        data = notifications.instance_data(
            instance, old_volume_id=old_bdm['volume_id'],
            new_volume_id=new_bdm['volume_id'],
            attach_mode=old_bdm['attach_mode'])
        self.notifier.notify(ctxt, 'instance.volume_swap', 'start', data)
        try:
            job = self.driver.swap_volume(instance, old_bdm, new_bdm)
        except Exception as exc:
            LOG.exception('Volume swap failed', instance=instance)
            self._swap_failed(ctxt, instance, new_bdm, data, exc)
            raise exception.DriverError(action='swap a volume', reason=exc)
        self._track_swap(ctxt, instance, old_bdm, new_bdm, data, job)

    def _swap_failed(self, ctxt, instance, new_bdm, data, exc):
        self.notifier.notify(ctxt, 'instance.volume_swap', 'error', data, exc)
        self.conductor.swap_failed(ctxt, instance['uuid'], new_bdm)

    def _track_swap(self, ctxt, instance, old_bdm, new_bdm, data, job):
        """Report how the swap's job ends."""
        def report(progress):
            if progress.finished:
                self.conductor.volume_swapped(ctxt, instance['uuid'],
                                              old_bdm, new_bdm)
                self.notifier.notify(ctxt, 'instance.volume_swap', 'end',
                                     data)
        self.jobs.submit('swap-%s' % new_bdm['attachment_id'], job, report,
                         lambda exc: self._swap_failed(ctxt, instance,
                                                       new_bdm, data, exc))

    def _recover_swap(self, ctxt, entry) -> None:
        old_bdm, new_bdm = entry['old_bdm'], entry['new_bdm']
        instance = {'uuid': entry['instance_uuid'], 'host': self.host}
        data = notifications.instance_data(
            instance, old_volume_id=old_bdm['volume_id'],
            new_volume_id=new_bdm['volume_id'],
            attach_mode=old_bdm['attach_mode'])
        LOG.warning('Reconciling the swap of volume %(old)s for %(new)s',
                    {'old': old_bdm['volume_id'],
                     'new': new_bdm['volume_id']},
                    instance_uuid=instance['uuid'])
        try:
            job = self.driver.swap_recover(entry)
        except Exception as exc:
            LOG.warning('The swap did not happen: %s', exc,
                        instance_uuid=instance['uuid'])
            self._swap_failed(ctxt, instance, new_bdm, data, exc)
            return
        self._track_swap(ctxt, instance, old_bdm, new_bdm, data, job)

    # Volume migrations.

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def migration_start(self, ctxt, migration, bdm):
        return self.migrations.start(ctxt, migration, bdm)

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def migration_cancel(self, ctxt, migration, bdm):
        self.migrations.cancel(ctxt, migration, bdm)

    @rpc.endpoint(unsigned=True)
    @locked_instance
    def migration_complete(self, ctxt, migration, bdm, dst_connection_info):
        self.migrations.complete(ctxt, migration, bdm, dst_connection_info)

    @rpc.endpoint(unsigned=True)
    def migration_reconcile(self, ctxt, migration, bdm, dst_connection_info):
        self._mine(ctxt, 'migration_reconcile', migration, {'bdm': bdm})
        # It takes the server's lock itself, after its own checks.
        self.migrations.reconcile(ctxt, migration, bdm, dst_connection_info)

    # Copies for Cinder migrations.

    @rpc.endpoint
    def volume_copy(self, ctxt, copy_id, src_connection_info,
                    dst_connection_info):
        self.copies.start(copy_id, src_connection_info, dst_connection_info)

    @rpc.endpoint
    def volume_checksum(self, ctxt, copy_id, connection_info):
        self.copies.checksum(copy_id, connection_info)

    @rpc.endpoint
    def volume_copy_status(self, ctxt, copy_id):
        return self.copies.status(copy_id)

    # Nova's servers on this host, read only.

    @rpc.endpoint
    def nova_disk(self, ctxt, server_id, volume_id):
        return nova_disks.source(CONF.libvirt.uri, server_id, volume_id)

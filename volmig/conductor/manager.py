"""Server side of the conductor's RPC API; a thin layer over the
conductor's modules. Methods mirror ``rpcapi`` one to one (the operator
topic's, ``operator_rpcapi``, are ``operator_manager``'s)."""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import versionutils

from volmig import block_storage
from volmig import context as volmig_context
from volmig import exception
from volmig import notifications
from volmig import rpc
from volmig import signing
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import cinder_drains
from volmig.conductor import cinder_moves
from volmig.conductor import healer
from volmig.conductor import instances
from volmig.conductor import migrations
from volmig.conductor import operator_manager
from volmig.conductor import queue
from volmig.conductor import recovery
from volmig.conductor import rpcapi
from volmig.conductor import rules
from volmig.conductor import services
from volmig.conductor import swaps
from volmig.conf import CONF
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)

# Who besides the controllers may call a method: what agents report, and
# the heartbeats of every service. An agent reports on its own host's
# servers and migrations only (``_own``). Each of these methods is one
# that the previous release's agents and volmig-volume call, so it serves
# them unsigned while an upgrade allows it, for hosts that do not sign yet.
AGENTS = (signing.COMPUTE,)
SERVICES = (signing.COMPUTE, signing.VOLUME)


def min_service_version(ctxt, binary: str) -> str | None:
    versions = [service['version']
                for service in service_db.get_all(ctxt, binary)]
    if not versions:
        return None
    return min(versions, key=versionutils.convert_version_to_tuple)


class ConductorManager:
    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, host: str):
        self.host = host
        volume_api = block_storage.get_adapter().with_database()
        compute_api = compute_rpcapi.ComputeAPI(
            lambda: min_service_version(volmig_context.get_admin_context(),
                                        compute_rpcapi.BINARY))
        self.cinder_moves = cinder_moves.CinderMoves(volume_api, compute_api,
                                                     host)
        self.instances = instances.InstanceConductor(volume_api, compute_api)
        self.swaps = swaps.SwapConductor(self.instances, self.cinder_moves)
        self.migrations = migrations.MigrationConductor(
            volume_api, on_end=self._migration_ended,
            notifier=notifications.Notifier('%s:%s' % (rpcapi.BINARY,
                                                       host)))
        self.queue = queue.MigrationQueue(self.migrations, compute_api,
                                           host)
        self.healer = healer.Healer(self.migrations, compute_api)
        self.recovery = recovery.OperatorRecovery(
            self.migrations, self.healer, compute_api)
        # The conductor drains the pools of Cinder, which has no drain of
        # its own; volmig-volume drains its own pools.
        self.cinder_drains = (
            cinder_drains.CinderDrains(volume_api, compute_api, host)
            if CONF.volume.backend == 'cinder' else None)
        self.operators = operator_manager.OperatorEndpoint(
            self.instances, self.recovery, self.cinder_drains)

    @staticmethod
    def _own(ctxt, method: str, instance_uuid=None, migration_id=None):
        """An agent speaks of its own host's servers and migrations only;
        their record is read for an agent's word, not a controller's."""
        sender = ctxt.sender
        if sender is None or sender.service == signing.CONTROLLER:
            return
        record = (instances_db.instance_get(ctxt, instance_uuid)
                  if instance_uuid else db.migration_get(ctxt, migration_id))
        signing.check_host(ctxt, record['host'], method)

    # Service plumbing.

    def rpc_topics(self) -> dict:
        """The topics this service consumes, each with its endpoints."""
        main: list = [self]
        if CONF.conductor.legacy_operator_topic:
            main.append(self.operators)
        return {rpcapi.TOPIC: main, rpcapi.OPERATOR_TOPIC: [self.operators]}

    def service_record(self) -> tuple[str, dict]:
        return rpcapi.RPC_API_VERSION, {}

    def periodic_tasks(self):
        # The moves a previous process of this conductor left are taken
        # up as soon as it serves, not a heal interval later.
        tasks = [(CONF.conductor.heal_interval, self.heal),
                 (CONF.conductor.heal_interval, self.cinder_moves.resume, 0),
                 (CONF.conductor.queue_interval, self.queue.dispatch)]
        if self.cinder_drains is not None:
            tasks.append((CONF.conductor.heal_interval,
                          self.cinder_drains.run_once, 0))
        return tasks

    def _migration_ended(self) -> None:
        self.queue.kick()

    def heal(self) -> None:
        self.healer.run(volmig_context.get_admin_context())

    def init_host(self) -> None:
        pass

    def cleanup_host(self) -> None:
        self.queue.stop()

    @rpc.endpoint(senders=SERVICES, unsigned=True)
    def service_update(self, ctxt, binary, host, topic, version,
                       capabilities):
        signing.check_host(ctxt, host, 'service_update', service=binary)
        return service_db.update(ctxt, binary, host, topic, version,
                                 capabilities)

    @rpc.endpoint
    def service_get_all(self, ctxt, binary, host=None, limit=None,
                        marker=None):
        return services.get_all(ctxt, binary, host=host, limit=limit,
                                marker=marker)

    @rpc.endpoint(senders=SERVICES, unsigned=True)
    def service_min_version(self, ctxt, binary):
        return min_service_version(ctxt, binary)

    # Instances.

    @rpc.endpoint
    def build_instances(self, ctxt, name, block_devices, count, host,
                        image_ref=None):
        return self.instances.build(ctxt, name, block_devices, count, host,
                                    image_ref)

    @rpc.endpoint
    def instance_console_output(self, ctxt, instance_uuid, length=None):
        return self.instances.console_output(ctxt, instance_uuid, length)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_get(self, ctxt, instance_uuid):
        self._own(ctxt, 'instance_get', instance_uuid=instance_uuid)
        return self.instances.get(ctxt, instance_uuid)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_list(self, ctxt, host=None, name=None, limit=None,
                      marker=None):
        signing.check_host(ctxt, host, 'instance_list')
        return self.instances.get_all(ctxt, host, name=name, limit=limit,
                                      marker=marker)

    @rpc.endpoint
    def stop_instance(self, ctxt, instance_uuid):
        return self.instances.stop(ctxt, instance_uuid)

    @rpc.endpoint
    def start_instance(self, ctxt, instance_uuid):
        return self.instances.start(ctxt, instance_uuid)

    @rpc.endpoint
    def attach_volume(self, ctxt, instance_uuid, volume_id, attach_mode):
        return self.instances.attach_volume(ctxt, instance_uuid, volume_id,
                                            attach_mode)

    @rpc.endpoint
    def detach_volume(self, ctxt, instance_uuid, volume_id):
        return self.instances.detach_volume(ctxt, instance_uuid, volume_id)

    @rpc.endpoint
    def swap_volume(self, ctxt, instance_uuid, old_volume_id, new_volume_id):
        return self.swaps.swap_volume(ctxt, instance_uuid,
                                          old_volume_id, new_volume_id)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def volume_swapped(self, ctxt, instance_uuid, old_bdm, new_bdm):
        self._own(ctxt, 'volume_swapped', instance_uuid=instance_uuid)
        return self.swaps.volume_swapped(ctxt, instance_uuid, old_bdm,
                                             new_bdm)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def swap_failed(self, ctxt, instance_uuid, new_bdm):
        self._own(ctxt, 'swap_failed', instance_uuid=instance_uuid)
        return self.swaps.swap_failed(ctxt, instance_uuid, new_bdm)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_update(self, ctxt, instance_uuid, values):
        """Agents older than 1.3 only; it takes power changes only."""
        self._own(ctxt, 'instance_update', instance_uuid=instance_uuid)
        allowed = {'power_state', 'vm_state', 'task_state'}
        if set(values) - allowed or values.get('task_state') is not None:
            raise exception.InvalidInput(
                field='values', reason='an agent may report power_state and '
                'vm_state, and clear task_state; not %s' % sorted(values))
        return instances_db.instance_update(ctxt, instance_uuid, values)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_power_changed(self, ctxt, instance_uuid, power_state,
                               vm_state):
        self._own(ctxt, 'instance_power_changed', instance_uuid=instance_uuid)
        rules.check_power_report(power_state, vm_state)
        return self.instances.power_changed(ctxt, instance_uuid,
                                            power_state, vm_state)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_build_failed(self, ctxt, instance_uuid, reason=None):
        self._own(ctxt, 'instance_build_failed', instance_uuid=instance_uuid)
        return self.instances.build_failed(ctxt, instance_uuid, reason)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_built(self, ctxt, instance_uuid, power_state):
        self._own(ctxt, 'instance_built', instance_uuid=instance_uuid)
        rules.check_power_report(power_state)
        return self.instances.built(ctxt, instance_uuid, power_state)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def instance_terminated(self, ctxt, instance_uuid):
        self._own(ctxt, 'instance_terminated', instance_uuid=instance_uuid)
        return self.instances.terminated(ctxt, instance_uuid)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def volume_detached(self, ctxt, instance_uuid, volume_id):
        self._own(ctxt, 'volume_detached', instance_uuid=instance_uuid)
        return self.instances.volume_detached(ctxt, instance_uuid, volume_id)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def volume_detach_failed(self, ctxt, instance_uuid, volume_id, reason):
        self._own(ctxt, 'volume_detach_failed', instance_uuid=instance_uuid)
        return self.instances.volume_detach_failed(ctxt, instance_uuid,
                                                   volume_id, reason)

    # Volume migrations.

    @rpc.endpoint
    def migration_begin(self, ctxt, src_attachment_id, starting=False,
                        owner=None):
        return self.migrations.begin(ctxt, src_attachment_id, starting,
                                     owner)

    @rpc.endpoint
    def migration_release(self, ctxt, migration_id):
        self.migrations.release(ctxt, migration_id)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_started(self, ctxt, migration_id, pauses):
        self._own(ctxt, 'migration_started', migration_id=migration_id)
        return self.migrations.started(ctxt, migration_id, pauses)

    @rpc.endpoint
    def migration_accept_cancel(self, ctxt, src_attachment_id):
        return self.migrations.accept_cancel(ctxt, src_attachment_id)

    @rpc.endpoint
    def migration_accept_complete(self, ctxt, src_attachment_id,
                                  dst_attachment_id):
        return self.migrations.accept_complete(ctxt, src_attachment_id,
                                               dst_attachment_id)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_get(self, ctxt, migration_ref):
        migration = self.migrations.get(ctxt, migration_ref)
        signing.check_host(ctxt, migration['host'], 'migration_get')
        return migration

    @rpc.endpoint
    def migration_list(self, ctxt, filters, limit=None, marker=None):
        return self.migrations.get_all(ctxt, filters, limit=limit,
                                       marker=marker)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_set_status(self, ctxt, migration_id, status, pauses=None):
        self._own(ctxt, 'migration_set_status', migration_id=migration_id)
        return self.migrations.set_status(ctxt, migration_id, status,
                                          pauses)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_switched(self, ctxt, migration_id, pauses):
        self._own(ctxt, 'migration_switched', migration_id=migration_id)
        return self.migrations.switched(ctxt, migration_id, pauses)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_job_ended(self, ctxt, migration_id, status, pauses):
        self._own(ctxt, 'migration_job_ended', migration_id=migration_id)
        return self.migrations.job_ended(ctxt, migration_id, status, pauses)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_recovered(self, ctxt, migration_id, side):
        self._own(ctxt, 'migration_recovered', migration_id=migration_id)
        return self.migrations.recovered(ctxt, migration_id, side)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_work_for_host(self, ctxt, host, uptime=None):
        signing.check_host(ctxt, host, 'migration_work_for_host')
        return self.healer.work_for_host(ctxt, host, uptime)

    @rpc.endpoint
    def migration_count_by_status(self, ctxt):
        return db.migration_count_by_status(ctxt)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_report_progress(self, ctxt, migration_id, bytes_done,
                                  bytes_total):
        self._own(ctxt, 'migration_report_progress', migration_id=migration_id)
        return self.migrations.report_progress(ctxt, migration_id,
                                               bytes_done, bytes_total)

    @rpc.endpoint(senders=AGENTS, unsigned=True)
    def migration_fail(self, ctxt, migration_id, reason, recovery_needed):
        self._own(ctxt, 'migration_fail', migration_id=migration_id)
        return self.migrations.fail(ctxt, migration_id, reason,
                                    recovery_needed)

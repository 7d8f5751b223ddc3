"""Server side of the conductor's operator topic: the calls that delete
or override records. Methods mirror ``operator_rpcapi`` one to one."""

import oslo_messaging as messaging

from volmig import exception
from volmig import rpc
from volmig.conductor import rpcapi
from volmig.conductor import services


class OperatorEndpoint:
    """The calls that delete or override records: only volmig-api and
    volmig-manage make them. They are served on a topic of their own,
    which ``tools/rabbitmq-setup.sh`` opens to those two users alone; an
    agent's user may not publish there."""

    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, instances_conductor, operator_recovery,
                 cinder_drains=None):
        self.instances = instances_conductor
        self.recovery = operator_recovery
        # None unless block storage is Cinder.
        self.drains = cinder_drains

    @rpc.endpoint
    def service_set_disabled(self, ctxt, binary, host, disabled,
                             reason=None):
        return services.set_disabled(ctxt, binary, host, disabled, reason)

    @rpc.endpoint
    def service_delete(self, ctxt, binary, host):
        services.delete(ctxt, binary, host)

    @rpc.endpoint
    def delete_instance(self, ctxt, instance_uuid):
        return self.instances.delete(ctxt, instance_uuid)

    @rpc.endpoint
    def migration_abort(self, ctxt, migration_id):
        return self.recovery.abort(ctxt, migration_id)

    @rpc.endpoint
    def migration_force_complete(self, ctxt, migration_id):
        return self.recovery.force_complete(ctxt, migration_id)

    @rpc.endpoint
    def migration_recover(self, ctxt, migration_id, side=None):
        return self.recovery.recover(ctxt, migration_id, side)

    @rpc.endpoint
    def instance_reset_state(self, ctxt, instance_uuid, vm_state):
        return self.recovery.reset_instance(ctxt, instance_uuid, vm_state)

    def _cinder_drains(self):
        if self.drains is None:
            raise exception.Invalid(reason='the conductor drains the pools '
                                    'of Cinder only; volmig-volume drains '
                                    'its own')
        return self.drains

    @rpc.endpoint
    def drain_pool(self, ctxt, pool, target_pool, max_parallel=1,
                   max_bandwidth_mbps=None, dry_run=False):
        return self._cinder_drains().drain(
            ctxt, pool, target_pool, max_parallel=max_parallel,
            max_bandwidth_mbps=max_bandwidth_mbps, dry_run=dry_run)

    @rpc.endpoint
    def pool_drain_get(self, ctxt, pool):
        return self._cinder_drains().show(ctxt, pool)

    @rpc.endpoint
    def pool_drain_list(self, ctxt, pool, limit=None, marker=None):
        return self._cinder_drains().history(ctxt, pool, limit, marker)

    @rpc.endpoint
    def pool_drain_cancel(self, ctxt, pool):
        return self._cinder_drains().cancel(ctxt, pool)

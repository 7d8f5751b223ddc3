"""Client side of the conductor's calls that delete or override records:
a server's delete, a service's disable and delete, and the operator's
actions on a stuck migration or server.

They go to a topic of their own (``volmig-conductor-operator``), which
only controllers may publish to (``tools/rabbitmq-setup.sh``); a compute
agent and block storage are given ``rpcapi.ConductorAPI``, which has none
of these methods.
"""

from volmig import exception
from volmig.conductor import rpcapi


class OperatorAPI(rpcapi.ConductorAPI):
    """What volmig-api and volmig-manage alone call."""

    def _operations_client(self, what: str):
        if not self.can_send_version(rpcapi.OPERATIONS_VERSION):
            raise exception.ServiceTooOld(service=rpcapi.BINARY, feature=what,
                                          needed=rpcapi.OPERATIONS_VERSION)
        return self.client.prepare(version=rpcapi.OPERATIONS_VERSION)

    def _operator(self, version: str):
        """Where the calls that delete or override records go: their own
        topic, or the main one for a conductor older than 1.6."""
        if self.can_send_version(rpcapi.OPERATOR_TOPIC_VERSION):
            return self.client.prepare(topic=rpcapi.OPERATOR_TOPIC,
                                       version=rpcapi.OPERATOR_TOPIC_VERSION)
        return self.client.prepare(version=version)

    def service_set_disabled(self, ctxt, binary, host, disabled,
                             reason=None):
        self._operations_client('service disable')
        return self._operator(rpcapi.OPERATIONS_VERSION).call(
            ctxt, 'service_set_disabled', binary=binary, host=host,
            disabled=disabled, reason=reason)

    def service_delete(self, ctxt, binary, host):
        self._operations_client('service delete')
        return self._operator(rpcapi.OPERATIONS_VERSION).call(
            ctxt, 'service_delete', binary=binary, host=host)

    def migration_count_by_status(self, ctxt):
        return self._operations_client('metrics').call(
            ctxt, 'migration_count_by_status')

    def delete_instance(self, ctxt, instance_uuid):
        return self._operator('1.0').call(ctxt, 'delete_instance',
                                          instance_uuid=instance_uuid)


    def _operator_call(self, ctxt, method, **kwargs):
        return self._operator(rpcapi.OWNER_VERSION).call(ctxt, method,
                                                         **kwargs)

    def migration_abort(self, ctxt, migration_id):
        return self._operator_call(ctxt, 'migration_abort',
                                   migration_id=migration_id)

    def migration_force_complete(self, ctxt, migration_id):
        return self._operator_call(ctxt, 'migration_force_complete',
                                   migration_id=migration_id)

    def migration_recover(self, ctxt, migration_id, side=None):
        return self._operator_call(ctxt, 'migration_recover',
                                   migration_id=migration_id, side=side)

    def instance_reset_state(self, ctxt, instance_uuid, vm_state):
        return self._operator_call(ctxt, 'instance_reset_state',
                                   instance_uuid=instance_uuid,
                                   vm_state=vm_state)

    # Drains of a Cinder backend (1.9).

    def _drains(self):
        if not self.can_send_version(rpcapi.DRAINS_VERSION):
            raise exception.ServiceTooOld(
                service=rpcapi.BINARY, feature='drains of Cinder pools',
                needed=rpcapi.DRAINS_VERSION)
        return self.client.prepare(topic=rpcapi.OPERATOR_TOPIC,
                                   version=rpcapi.DRAINS_VERSION)

    def drain_pool(self, ctxt, pool, target_pool, max_parallel=1,
                   max_bandwidth_mbps=None, dry_run=False):
        return self._drains().call(
            ctxt, 'drain_pool', pool=pool, target_pool=target_pool,
            max_parallel=max_parallel,
            max_bandwidth_mbps=max_bandwidth_mbps, dry_run=dry_run)

    def pool_drain_get(self, ctxt, pool):
        return self._drains().call(ctxt, 'pool_drain_get', pool=pool)

    def pool_drain_list(self, ctxt, pool, limit=None, marker=None):
        return self._drains().call(ctxt, 'pool_drain_list', pool=pool,
                                   limit=limit, marker=marker)

    def pool_drain_cancel(self, ctxt, pool):
        return self._drains().call(ctxt, 'pool_drain_cancel', pool=pool)

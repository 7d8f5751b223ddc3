"""What an operator runs when a migration or a server is stuck.

Each action refuses what would lose data, and says why. The agent does
the work on its guest; where the agent's host is lost, only the records
can be put right, and the operator must say which side to keep.
"""

from oslo_log import log as logging

from volmig import exception
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import healer as healer_mod
from volmig.conductor import migrations as migration_conductor
from volmig.conductor import services
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)

SIDES = ('src', 'dst')
# Past these the guest is, or is being, switched to dst; from
# src_released on, src may already be gone.
_SWITCHING = states.COMPLETE_REQUESTED - {states.COMPLETED}


class OperatorRecovery:

    def __init__(self, migrations: migration_conductor.MigrationConductor,
                 healer: healer_mod.Healer,
                 compute_api: compute_rpcapi.ComputeAPI):
        self.migrations = migrations
        self.healer = healer
        self.compute_api = compute_api

    def _agent_up(self, ctxt, host: str) -> bool:
        try:
            service = service_db.get(ctxt, compute_rpcapi.BINARY, host)
        except exception.ServiceNotFound:
            return False
        return services.service_is_up(service)

    def abort(self, ctxt, migration_id: str) -> dict:
        """Send the guest back to src; only while src is still whole."""
        migration = db.migration_get(ctxt, migration_id)
        status = migration['status']
        if status in _SWITCHING:
            raise exception.MigrationRecoveryRefused(
                migration_id=migration_id, action='abort',
                reason='it is %s: the guest is being switched to dst, and '
                'its writes since the start are going there; going back to '
                'src would lose them. Use force_complete' % status)
        if status in states.TERMINAL:
            raise exception.InvalidMigrationState(
                action='abort', migration_id=migration_id, status=status)
        if status in states.NOT_SENT:
            return self.migrations.fail(
                ctxt, migration_id, 'aborted by an operator before any '
                'agent took it', recovery_needed=False)
        if status == states.STARTED:
            accepted = self.migrations.accept_cancel(
                ctxt, migration['src_attachment_id'])
            self.compute_api.migration_cancel(
                ctxt, migration['host'], accepted['migration'],
                accepted['bdm'])
            return accepted['migration']
        # starting or cancelling: the agent rolls these back to src.
        self._require_agent(ctxt, migration, 'abort')
        self.healer.reconcile(ctxt, migration)
        return migration_conductor.present(migration)

    def force_complete(self, ctxt, migration_id: str) -> dict:
        """Finish a migration past its switch, or one needing recovery."""
        migration = db.migration_get(ctxt, migration_id)
        if not (migration['status'] in _SWITCHING
                or migration['recovery_needed']):
            raise exception.MigrationRecoveryRefused(
                migration_id=migration_id, action='force_complete',
                reason='it is %s: only a migration being switched to dst, '
                'or one that needs recovery, can be forced; a started one '
                'waits for the block-storage service to complete it with a '
                'copy' % migration['status'])
        self._require_agent(ctxt, migration, 'force_complete')
        self.healer.reconcile(ctxt, migration)
        return migration_conductor.present(migration)

    def recover(self, ctxt, migration_id: str,
                side: str | None = None) -> dict:
        """Finish a failed migration's recovery.

        With the agent up, it recovers the guest to the side it is on and
        ``side`` must not be given. With its host lost, the guest's
        overlay is lost with it; ``side`` then says which volume the
        server keeps, and only the records change.
        """
        migration = db.migration_get(ctxt, migration_id)
        if migration['status'] in states.IN_PROGRESS:
            return self.force_complete(ctxt, migration_id)
        if not migration['recovery_needed']:
            raise exception.MigrationRecoveryRefused(
                migration_id=migration_id, action='recover',
                reason='it is %s and needs no recovery'
                % migration['status'])
        if self._agent_up(ctxt, migration['host']):
            if side is not None:
                raise exception.MigrationRecoveryRefused(
                    migration_id=migration_id, action='recover',
                    reason='the agent on %s is up: it recovers the guest to '
                    'the side it is on. --to is for a lost host'
                    % migration['host'])
            self.healer.reconcile(ctxt, migration)
            return migration_conductor.present(migration)
        if side not in SIDES:
            raise exception.MigrationRecoveryRefused(
                migration_id=migration_id, action='recover',
                reason='the agent on %s is down: say which volume the '
                'server keeps, src or dst (the writes since the start were '
                'in its host-local overlay)' % migration['host'])
        if side == 'dst' and not migration['dst_attachment_id']:
            raise exception.MigrationRecoveryRefused(
                migration_id=migration_id, action='recover',
                reason='it never had a dst attachment')
        LOG.warning('Volume migration %(id)s: recovered by hand to %(side)s '
                    'with its host %(host)s down',
                    {'id': migration_id, 'side': side,
                     'host': migration['host']})
        return self.migrations.recovered(ctxt, migration_id, side)

    def reset_instance(self, ctxt, instance_uuid: str, vm_state: str) -> dict:
        """Clear a server's task state, unless a migration holds it."""
        if vm_state not in (states.VM_ACTIVE, states.VM_ERROR,
                            states.VM_STOPPED):
            raise exception.InvalidInput(
                field='state', reason='expected active, stopped or error, '
                'not %r' % vm_state)
        instances_db.instance_get(ctxt, instance_uuid)
        busy = db.migration_get_all(ctxt, status=states.IN_PROGRESS,
                                    instance_uuid=instance_uuid)
        if busy:
            raise exception.MigrationRecoveryRefused(
                migration_id=busy[0]['id'], action='reset the server of',
                reason='it is %s; abort or recover the migration instead, '
                'or its guest could be left on an overlay'
                % busy[0]['status'])
        LOG.warning('Server %(uuid)s reset to %(state)s by an operator',
                    {'uuid': instance_uuid, 'state': vm_state})
        return instances_db.instance_update(ctxt, instance_uuid, {
            'task_state': None, 'vm_state': vm_state})

    def _require_agent(self, ctxt, migration: dict, action: str) -> None:
        if not self._agent_up(ctxt, migration['host']):
            raise exception.MigrationRecoveryRefused(
                migration_id=migration['id'], action=action,
                reason='its compute agent on %s is down; start it, or once '
                'the migration has failed, recover it with --to src|dst'
                % migration['host'])

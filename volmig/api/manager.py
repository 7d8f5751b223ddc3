"""volmig-api's RPC face: what the block-storage client calls.

API version history:

    1.0 - Initial version: migration_start, migration_cancel,
          migration_complete, migration_get, migration_list.
    1.1 - migration_list takes limit and marker: a page of migrations.

The API validates and authorizes, asks the conductor to validate the rules
and record, then calls or casts to the compute agent on the instance's
host.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from volmig import context as volmig_context
from volmig import exception
from volmig import owners
from volmig import policy
from volmig import rpc
from volmig import signing
from volmig import states
from volmig.api import senders
from volmig.api import validation
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conductor import start
from volmig.policies import volume_migrations as migration_policy

LOG = logging.getLogger(__name__)
# Who besides the controllers drives migrations: block storage, of the
# deployment's kind (``senders``). The previous release's block storage
# calls every method here, so each serves it unsigned while an upgrade
# allows it.
BLOCK_STORAGE = (signing.VOLUME, signing.CLIENT)

BINARY = TOPIC = 'volmig-api'
RPC_API_VERSION = '1.1'
LIST_FILTERS = ('status', 'instance_uuid', 'volume_id', 'host')


class _Recorder:
    """start.Recorder over the conductor's RPC API."""

    def __init__(self, conductor: conductor_rpcapi.ConductorAPI):
        self.conductor = conductor

    def started(self, ctxt, migration_id: str, pauses: dict) -> dict:
        return self.conductor.migration_started(ctxt, {'id': migration_id},
                                                pauses)

    def fail(self, ctxt, migration_id: str, reason: str,
             recovery_needed: bool) -> dict:
        return self.conductor.migration_fail(ctxt, migration_id, reason,
                                             recovery_needed)

    def release(self, ctxt, migration_id: str) -> None:
        self.conductor.migration_release(ctxt, migration_id)


class APIManager:
    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, host: str):
        self.host = host
        self.senders = senders.Senders()
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.compute = compute_rpcapi.ComputeAPI(
            lambda: self.conductor.service_min_version(
                volmig_context.get_admin_context(),
                compute_rpcapi.BINARY))

    def service_record(self) -> tuple[str, dict]:
        return RPC_API_VERSION, {}

    def periodic_tasks(self):
        return []

    def init_host(self) -> None:
        pass

    def cleanup_host(self) -> None:
        pass

    @rpc.endpoint(senders=BLOCK_STORAGE, unsigned=True)
    def migration_start(self, ctxt, src_attachment_id):
        """At most four round trips: this call, begin, the agent, started.

        Agents older than compute RPC 1.3 report their own start instead.
        """
        policy.authorize(ctxt, migration_policy.PREFIX % 'start')
        validation.require_uuid('src_attachment_id', src_attachment_id)
        self.senders.check(ctxt, 'migration_start', src_attachment_id)
        # Both sides must know that the agent answers with a result.
        starting = (
            self.compute.can_send_version(compute_rpcapi.OWNER_VERSION)
            and self.conductor.can_send_version(
                conductor_rpcapi.OWNER_VERSION))
        begun = self.conductor.migration_begin(
            ctxt, src_attachment_id, starting=starting,
            owner=owners.identity(BINARY, self.host))
        migration = begun['migration']
        if not begun['created'] or migration['status'] == states.QUEUED:
            # A queued one is the conductor's to start when a cap allows.
            return migration
        return start.run(ctxt, self.compute, _Recorder(self.conductor),
                         migration, begun['bdm'])

    @rpc.endpoint(senders=BLOCK_STORAGE, unsigned=True)
    def migration_cancel(self, ctxt, src_attachment_id):
        policy.authorize(ctxt, migration_policy.PREFIX % 'cancel')
        validation.require_uuid('src_attachment_id', src_attachment_id)
        self.senders.check(ctxt, 'migration_cancel', src_attachment_id)
        accepted = self.conductor.migration_accept_cancel(ctxt,
                                                          src_attachment_id)
        migration = accepted['migration']
        if accepted['send']:
            self.compute.migration_cancel(ctxt, migration['host'], migration,
                                          accepted['bdm'])
        return migration

    @rpc.endpoint(senders=BLOCK_STORAGE, unsigned=True)
    def migration_complete(self, ctxt, src_attachment_id, dst_attachment_id):
        policy.authorize(ctxt, migration_policy.PREFIX % 'complete')
        validation.require_uuid('src_attachment_id', src_attachment_id)
        validation.require_uuid('dst_attachment_id', dst_attachment_id)
        self.senders.check(ctxt, 'migration_complete', src_attachment_id,
                           dst_attachment_id)
        accepted = self.conductor.migration_accept_complete(
            ctxt, src_attachment_id, dst_attachment_id)
        migration = accepted['migration']
        if accepted['send']:
            self.compute.migration_complete(
                ctxt, migration['host'], migration, accepted['bdm'],
                accepted['dst_connection_info'])
        return migration

    @rpc.endpoint(senders=BLOCK_STORAGE, unsigned=True)
    def migration_get(self, ctxt, migration_ref):
        policy.authorize(ctxt, migration_policy.PREFIX % 'show')
        validation.require_uuid('migration_ref', migration_ref)
        return self.conductor.migration_get(ctxt, migration_ref)

    @rpc.endpoint(senders=BLOCK_STORAGE, unsigned=True)
    def migration_list(self, ctxt, filters, limit=None, marker=None):
        policy.authorize(ctxt, migration_policy.PREFIX % 'show')
        validation.require_filters(filters, LIST_FILTERS)
        if limit is not None and (not isinstance(limit, int)
                                  or isinstance(limit, bool) or limit < 0):
            raise exception.InvalidInput(
                field='limit', reason='%r is not a non-negative integer'
                % (limit,))
        return self.conductor.migration_list(ctxt, filters, limit=limit,
                                             marker=marker)

"""``/os-volume-pools/{pool}``: draining a pool of the block-storage
service (volmig-volume), and the drain's progress."""

from volmig import policy
from volmig.api import validation
from volmig.api.rest import controller
from volmig.api.rest.schemas import pools as schemas
from volmig.policies import volume_pools as pools_policy

RULE = pools_policy.PREFIX


class PoolsController(controller.Controller):

    def show(self, req, pool):
        policy.authorize(req.context, RULE % 'show')
        return 200, {'drain': self.volume_api.pool_drain_get(req.context,
                                                             pool)}

    @validation.schema(schemas.action)
    def action(self, req, pool, body):
        """``drain`` answers 202 with the drain (200 with the plan for a
        dry run); ``cancel_drain`` 202 with what is left under way."""
        ctxt = req.context
        policy.authorize(ctxt, RULE % 'drain')
        if 'cancel_drain' in body:
            return 202, {'drain': self.volume_api.pool_drain_cancel(ctxt,
                                                                    pool)}
        request = body['drain']
        drain = self.volume_api.drain_pool(
            ctxt, pool, request['to'],
            max_parallel=request.get('max_parallel', 1),
            max_bandwidth_mbps=request.get('max_bandwidth_mbps'),
            dry_run=request.get('dry_run', False))
        return (200 if drain['dry_run'] else 202), {'drain': drain}

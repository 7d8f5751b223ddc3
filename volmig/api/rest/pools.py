"""``/os-volume-pools/{pool}``: draining a pool of the block-storage
service (volmig-volume's, or Cinder's ``host@backend#pool``), the drain's
progress, and the pool's drains."""

from volmig import policy
from volmig.api import validation
from volmig.api.rest import controller
from volmig.api.rest.schemas import pools as schemas
from volmig.policies import volume_pools as pools_policy

RULE = pools_policy.PREFIX


class PoolsController(controller.Controller):

    def show(self, req, pool):
        policy.authorize(req.context, RULE % 'show')
        return 200, {'drain': self.drainer.pool_drain_get(req.context,
                                                             pool)}

    def drains(self, req, pool):
        """Every drain of the pool, newest first, a page at a time."""
        policy.authorize(req.context, RULE % 'show')
        page = controller.page(req)
        validation.require_filters(dict(req.GET), ())
        found = self.drainer.pool_drain_list(req.context, pool, **page)
        return 200, dict({'drains': found},
                         **controller.links(req, 'drains', found, page))

    @validation.schema(schemas.action)
    def action(self, req, pool, body):
        """``drain`` answers 202 with the drain (200 with the plan for a
        dry run); ``cancel_drain`` 202 with what is left under way."""
        ctxt = req.context
        policy.authorize(ctxt, RULE % 'drain')
        if 'cancel_drain' in body:
            return 202, {'drain': self.drainer.pool_drain_cancel(ctxt,
                                                                    pool)}
        request = body['drain']
        drain = self.drainer.drain_pool(
            ctxt, pool, request['to'],
            max_parallel=request.get('max_parallel', 1),
            max_bandwidth_mbps=request.get('max_bandwidth_mbps'),
            dry_run=request.get('dry_run', False))
        return (200 if drain['dry_run'] else 202), {'drain': drain}

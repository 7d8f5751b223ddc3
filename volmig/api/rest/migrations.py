"""``/os-volume-migrations``: what volume migrations are doing."""

from volmig import policy
from volmig.api import manager as rpc_face
from volmig.api import validation
from volmig.api.rest import controller
from volmig.api.rest.schemas import migrations as schemas
from volmig.policies import volume_migrations as migrations_policy

RULE = migrations_policy.PREFIX % 'show'


class MigrationsController(controller.Controller):

    def index(self, req):
        policy.authorize(req.context, RULE)
        page = controller.page(req)
        filters = dict(req.GET)
        validation.require_filters(filters, rpc_face.LIST_FILTERS)
        found = self.conductor.migration_list(req.context, filters, **page)
        return 200, dict({'volume_migrations': found}, **controller.links(
            req, 'volume_migrations', found, page))

    def show(self, req, migration_id):
        policy.authorize(req.context, RULE)
        validation.require_uuid('migration_id', migration_id)
        return 200, {'volume_migration': self.conductor.migration_get(
            req.context, migration_id)}

    @validation.schema(schemas.action)
    def action(self, req, migration_id, body):
        """``abort`` or ``force_complete``; each refuses data loss (409)."""
        (verb,) = body
        policy.authorize(req.context, migrations_policy.PREFIX % verb)
        validation.require_uuid('migration_id', migration_id)
        act = getattr(self.conductor, 'migration_%s' % verb)
        return 202, {'volume_migration': act(req.context, migration_id)}

"""``/os-services``: every service's heartbeat record (admin)."""

from volmig import policy
from volmig.api import validation
from volmig.api.rest import controller
from volmig.policies import services as services_policy

FILTERS = ('binary', 'host')


def service_view(service: dict) -> dict:
    return {'id': service['id'], 'binary': service['binary'],
            'host': service['host'],
            'status': 'disabled' if service['disabled'] else 'enabled',
            'state': 'up' if service['is_up'] else 'down',
            'disabled_reason': service['disabled_reason'],
            'version': service['version'],
            'updated_at': service['last_seen_at']}


class ServicesController(controller.Controller):

    def index(self, req):
        policy.authorize(req.context, services_policy.LIST)
        page = controller.page(req, marker_type=int)
        filters = dict(req.GET)
        validation.require_filters(filters, FILTERS)
        found = self.conductor.service_get_all(
            req.context, filters.get('binary'), filters.get('host'), **page)
        return 200, dict({'services': [service_view(service)
                                       for service in found]},
                         **controller.links(req, 'services', found, page))

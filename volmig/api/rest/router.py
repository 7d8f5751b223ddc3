"""URL to controller action, with 404 and 405 for the misses."""

import routes
import webob.dec

from volmig.api.rest import attachments
from volmig.api.rest import migrations
from volmig.api.rest import pools
from volmig.api.rest import servers
from volmig.api.rest import services
from volmig.api.rest import versions
from volmig.api.rest import volumes
from volmig.api.rest import wsgi

PREFIX = '/v2.1'

# (path, {method: action}) for each controller.
ROUTES = {
    versions.VersionsController: [
        (PREFIX, {'GET': 'show'}),
        (PREFIX + '/', {'GET': 'show'}),
    ],
    servers.ServersController: [
        (PREFIX + '/servers', {'GET': 'index', 'POST': 'create'}),
        (PREFIX + '/servers/detail', {'GET': 'detail'}),
        (PREFIX + '/servers/{server_id}', {'GET': 'show',
                                           'DELETE': 'delete'}),
        (PREFIX + '/servers/{server_id}/action', {'POST': 'action'}),
    ],
    attachments.AttachmentsController: [
        (PREFIX + '/servers/{server_id}/os-volume_attachments',
         {'GET': 'index', 'POST': 'create'}),
        (PREFIX + '/servers/{server_id}/os-volume_attachments/{volume_id}',
         {'GET': 'show', 'PUT': 'update', 'DELETE': 'delete'}),
    ],
    volumes.VolumesController: [
        (PREFIX + '/os-volumes', {'GET': 'index', 'POST': 'create'}),
        (PREFIX + '/os-volumes/detail', {'GET': 'index'}),
        (PREFIX + '/os-volumes/{volume_id}', {'GET': 'show',
                                              'DELETE': 'delete'}),
        (PREFIX + '/os-volumes/{volume_id}/action', {'POST': 'action'}),
    ],
    pools.PoolsController: [
        (PREFIX + '/os-volume-pools/{pool}', {'GET': 'show'}),
        (PREFIX + '/os-volume-pools/{pool}/drains', {'GET': 'drains'}),
        (PREFIX + '/os-volume-pools/{pool}/action', {'POST': 'action'}),
    ],
    services.ServicesController: [
        (PREFIX + '/os-services', {'GET': 'index'}),
    ],
    migrations.MigrationsController: [
        (PREFIX + '/os-volume-migrations', {'GET': 'index'}),
        (PREFIX + '/os-volume-migrations/{migration_id}', {'GET': 'show'}),
        (PREFIX + '/os-volume-migrations/{migration_id}/action',
         {'POST': 'action'}),
    ],
}


class Router:

    def __init__(self):
        self.mapper = routes.Mapper()
        self.any_method = routes.Mapper()
        for controller_class, paths in ROUTES.items():
            resource = wsgi.Resource(controller_class())
            for path, actions in paths:
                for method, action in actions.items():
                    self.mapper.connect(path, controller=resource,
                                        action=action,
                                        conditions={'method': [method]})
                self.any_method.connect(path,
                                        allowed=', '.join(sorted(actions)))

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def __call__(self, req):
        match = self.mapper.match(environ=req.environ)
        if match is None:
            known = self.any_method.match(req.path_info)
            if known is None:
                return wsgi.fault(404, 'No such resource: %s' % req.path)
            return wsgi.fault(405, 'Method %s is not allowed on %s.' % (
                req.method, req.path), {'Allow': known['allowed']})
        resource = match.pop('controller')
        req.urlvars = match
        return req.get_response(resource)

"""Who is calling: Keystone tokens, or noauth2 for tests and demos.

Either way the result is a ``RequestContext`` in
``environ['volmig.context']``; policy decides what it may do.
"""

from keystonemiddleware import auth_token
import webob.dec

from volmig import context as volmig_context
from volmig.api.rest import wsgi
from volmig.conf import CONF

ADMIN_USER = 'admin'


def _context(user_id, project_id, roles, request_id=None):
    return volmig_context.RequestContext(
        user_id=user_id, project_id=project_id, roles=roles,
        is_admin='admin' in roles, request_id=request_id)


class NoAuth2:
    """Believes the token ``USER:PROJECT``; ``admin`` is an admin.

    Every user has the member and reader roles; ``X-Roles`` adds more
    (``service``, say). Never use this where the API is reachable by
    anyone who should not be an administrator.
    """

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def __call__(self, req):
        token = req.headers.get('X-Auth-Token', '')
        user_id, _, project_id = token.partition(':')
        if not user_id:
            return wsgi.fault(401, 'noauth2 needs an X-Auth-Token header '
                                   'of the form USER:PROJECT.')
        roles = ['reader', 'member']
        if user_id == ADMIN_USER:
            roles.append('admin')
        roles += [role.strip() for role in
                  req.headers.get('X-Roles', '').split(',') if role.strip()]
        req.environ['volmig.context'] = _context(
            user_id, project_id or user_id, roles,
            req.environ.get('openstack.request_id'))
        return req.get_response(self.application)


class KeystoneContext:
    """Makes the context from the headers keystonemiddleware set."""

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def __call__(self, req):
        if req.headers.get('X-Identity-Status') != 'Confirmed':
            return wsgi.fault(401, 'Authentication required.')
        ctxt = volmig_context.RequestContext.from_environ(req.environ)
        ctxt.is_admin = 'admin' in ctxt.roles
        req.environ['volmig.context'] = ctxt
        return req.get_response(self.application)


def pipeline(application):
    """Wrap ``application`` in the configured ``[api] auth_strategy``."""
    if CONF.api.auth_strategy == 'noauth2':
        return NoAuth2(application)
    return auth_token.AuthProtocol(KeystoneContext(application),
                                   {'oslo_config_config': CONF})

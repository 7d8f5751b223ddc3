"""The REST API's WSGI application.

``/`` (the versions document) answers without authentication, so load
balancers and ``volmig-all-in-one`` can use it as a readiness check, and
so does ``/healthcheck`` (database and RabbitMQ reachable: 200, else
503), and ``/metrics`` (Prometheus) unless ``[metrics] api_access`` asks
for a token or turns it off; everything else goes through auth (``[api]
auth_strategy``) first.
"""

from oslo_middleware import healthcheck
from oslo_middleware import http_proxy_to_wsgi
from oslo_middleware import request_id
import prometheus_client
import webob
import webob.dec

from volmig import exception
from volmig import metrics
from volmig import policy
from volmig.api.rest import auth
from volmig.api.rest import router
from volmig.api.rest import versions
from volmig.api.rest import wsgi
from volmig.conductor import operator_rpcapi
from volmig.conf import CONF
from volmig.policies import metrics as metrics_policies


class Root:

    def __init__(self, application):
        self.application = application
        self.versions = wsgi.Resource(versions.VersionsController())
        self.health = healthcheck.Healthcheck(None, CONF)
        self.metrics = prometheus_client.CollectorRegistry(auto_describe=False)
        self.metrics.register(metrics.MigrationsByStatus(
            operator_rpcapi.OperatorAPI()))
        # [metrics] api_access = token: after the auth pipeline.
        self.protected_metrics = auth.pipeline(self._authorized_exposition)

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def __call__(self, req):
        if req.path_info in ('', '/') and req.method == 'GET':
            req.urlvars = {'action': 'index'}
            return req.get_response(self.versions)
        if req.path_info == '/healthcheck':
            return req.get_response(self.health)
        if req.path_info == '/metrics' and req.method == 'GET':
            access = CONF.metrics.api_access
            if access == 'open':
                return self.exposition(req)
            if access == 'token':
                return req.get_response(self.protected_metrics)
            return wsgi.fault(404, '/metrics is not served on this port '
                                   '([metrics] api_access is off).')
        return req.get_response(self.application)

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def exposition(self, req):
        return webob.Response(
            body=metrics.exposition(self.metrics),
            content_type=prometheus_client.CONTENT_TYPE_LATEST.split(
                ';')[0], charset='utf-8')

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def _authorized_exposition(self, req):
        try:
            policy.authorize(req.environ['volmig.context'],
                             metrics_policies.GET)
        except exception.Forbidden as exc:
            return wsgi.fault(403, exc.message)
        return self.exposition(req)


def build():
    """The app, for the configuration already loaded.

    Behind a TLS-terminating proxy, ``[oslo_middleware]
    enable_proxy_headers_parsing`` makes links use the scheme and host of
    the proxy's ``X-Forwarded-*`` or ``Forwarded`` headers.
    """
    return http_proxy_to_wsgi.HTTPProxyToWSGI(
        request_id.RequestId(Root(auth.pipeline(router.Router()))), CONF)

"""Requests in, JSON and Nova-style faults out.

A ``Resource`` wraps one controller: it reads the microversion and the
JSON body, calls the action the router chose, and turns a typed error
(``exception.VolmigException``, also when it crossed RPC) into
``{"<name>": {"code": N, "message": "..."}}`` with its HTTP code.
"""

import http

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_serialization import jsonutils
import webob
import webob.dec

from volmig import exception
from volmig.api.rest import microversion

LOG = logging.getLogger(__name__)

# Nova's names for the fault envelope.
FAULT_NAMES = {400: 'badRequest', 401: 'unauthorized', 403: 'forbidden',
               404: 'itemNotFound', 405: 'badMethod', 406: 'notAcceptable',
               409: 'conflictingRequest', 415: 'badMediaType',
               501: 'notImplemented', 503: 'serviceUnavailable'}


def json_response(status: int, body=None, headers=None) -> webob.Response:
    response = webob.Response(status=status, headerlist=[])
    if body is not None:
        response.content_type = 'application/json'
        response.charset = 'utf-8'
        response.text = jsonutils.dumps(body)
    response.headers.update(headers or {})
    return response


def fault(code: int, message: str, headers=None) -> webob.Response:
    name = FAULT_NAMES.get(code, 'computeFault')
    return json_response(code, {name: {'code': code, 'message': message}},
                         headers)


def _error_code(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, exception.VolmigException):
        return exc.code, exception.safe_message(exc)
    if isinstance(exc, messaging.MessagingTimeout):
        return 503, 'A volmig service did not answer in time; try again.'
    LOG.exception('Unexpected error in the REST API')
    return 500, 'Unexpected error (%s); see the volmig-api log.' % (
        type(exc).__name__)


class Request(webob.Request):

    @property
    def context(self):
        return self.environ['volmig.context']

    @property
    def api_version(self):
        return self.environ['volmig.api_version']

    def is_at_least(self, version) -> bool:
        return self.api_version >= version


class Resource:
    """One controller's actions, as a WSGI app."""

    def __init__(self, controller):
        self.controller = controller

    @webob.dec.wsgify(RequestClass=Request)
    def __call__(self, req: Request):
        kwargs = dict(req.urlvars)
        action = kwargs.pop('action')
        headers: dict = {}
        try:
            version = microversion.from_headers(req.headers)
            req.environ['volmig.api_version'] = version
            headers = microversion.response_headers(version)
            body = self._body(req)
            if body is not None:
                kwargs['body'] = body
            result = getattr(self.controller, action)(req, **kwargs)
        except Exception as exc:
            code, message = _error_code(exc)
            LOG.info('%(method)s %(path)s: %(code)d %(message)s',
                     {'method': req.method, 'path': req.path, 'code': code,
                      'message': message})
            return fault(code, message, headers)
        status, payload = result
        return json_response(status, payload, headers)

    @staticmethod
    def _body(req: Request):
        if req.method not in ('POST', 'PUT'):
            return None
        try:
            raw = req.body
        except (ValueError, OSError) as exc:
            # A malformed chunked encoding, or a client that hung up.
            raise exception.Invalid(reason='the request body could not be '
                                    'read: %s' % exc)
        if not raw:
            raise exception.Invalid(reason='the request has no body')
        if req.content_type not in ('application/json', ''):
            raise UnsupportedMediaType(content_type=req.content_type)
        try:
            return jsonutils.loads(raw)
        except ValueError as exc:
            raise exception.Invalid(reason='malformed JSON body: %s' % exc)
        except RecursionError:
            raise exception.Invalid(reason='the JSON body is nested too '
                                    'deeply')


class UnsupportedMediaType(exception.VolmigException):
    msg_fmt = 'Unsupported Content-Type %(content_type)s; send JSON.'
    code = http.HTTPStatus.UNSUPPORTED_MEDIA_TYPE

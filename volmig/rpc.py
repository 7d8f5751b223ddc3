"""The one place where RPC transports, clients and servers are built."""

import functools
import inspect
import socket
import time

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging import transport as messaging_transport
from oslo_messaging._drivers import common as rpc_common
from oslo_messaging.rpc import server as rpc_server
from oslo_serialization import jsonutils

from volmig import context as volmig_context
from volmig import exception
from volmig import metrics
from volmig import signing
from volmig.conf import CONF
from volmig.conf import signing as signing_conf
from volmig.signing import dispatch
from volmig.signing import keys
from volmig.signing import registry
from volmig.signing import seals

LOG = logging.getLogger(__name__)

# Typed exceptions from this module cross RPC as themselves.
ALLOWED_EXMODS = ['volmig.exception']
# volmig's topics live in this exchange, whichever service's transport
# (Cinder's defaults to its own) a client is built on.
EXCHANGE = 'volmig'

_TRANSPORT = None
_NOTIFICATION_TRANSPORT = None
# How often a send tries to reach the broker; None: until it does.
_RETRY: int | None = None
# A request whose answer never came: the service it asked may have done
# it or not. A service that is away (a restart, a rolling upgrade) answers
# a request asked again once it is back.
LOST = (messaging.MessagingTimeout, messaging.MessageDeliveryFailure,
        exception.ServiceTimeout)
# Seconds between the asks of ``until_answered``: doubled each time, up
# to the most. Each lost ask already waited ``rpc_response_timeout``.
ASK_AGAIN_FIRST = 0.5
ASK_AGAIN_MOST = 10.0


def init(conf=CONF, retry: int | None = None,
         identity: tuple | None = None, process: str | None = None) -> None:
    """``retry``: how many times a send tries again to reach the broker
    before it fails; services wait for it (None), a command does not.
    ``identity``: what this process signs as, ``(kind, host)`` (host None:
    any host of that kind), which its key must fit. ``process``: its name
    in the names of its reply queues, where its program's is not (a WSGI
    server's).

    Raises ``ConfigurationError`` when this process has no signing key, or
    one of another kind or host."""
    global _TRANSPORT, _NOTIFICATION_TRANSPORT, _RETRY
    _RETRY = retry
    if _TRANSPORT is None:
        name_queues(conf, process=process)
        _TRANSPORT = get_transport(conf)
        _NOTIFICATION_TRANSPORT = messaging.get_notification_transport(conf)
    if identity is not None:
        _TRANSPORT.keyring.require(*identity)


def name_queues(conf, process: str | None = None) -> None:
    """Reply and fanout queues named for this host and process
    (``reply_<host>:<process>:<n>``, oslo.messaging's queue manager), not
    at random: a host's RabbitMQ user may read the queues of its own name
    only (``tools/rabbitmq-setup.sh``)."""
    conf.set_default('use_queue_manager', True,
                     group='oslo_messaging_rabbit')
    conf.set_default('hostname', conf.host, group='oslo_messaging_rabbit')
    if process:
        conf.set_default('processname', process,
                         group='oslo_messaging_rabbit')


class SignedTransport(messaging_transport.RPCTransport):
    """Seals every message it sends with its process's key, and takes a
    call's reply only when the server called sealed it.

    The one place where a message, its context and its target meet
    before the driver sends them, and where a reply comes back.
    """

    def __init__(self, driver):
        super().__init__(driver)
        signing_conf.register_opts(self.conf)
        try:
            host = self.conf.host
        except cfg.NoSuchOptError:
            # A caller's own configuration (a block-storage service's) may
            # have none: a host key names its holder anyway.
            host = socket.gethostname()
        self.keyring = keys.Keyring(keys.key_file(self.conf), host)
        if self.keyring.holder is None:
            self.keyring.registry = registry.Registry(_registered_hosts)

    def _send(self, target, ctxt, message, wait_for_reply=None, *args,
              **kwargs):
        if target.topic in seals.HOST_TOPICS:
            # A host acts in no other service for anyone: it never needs
            # a user's token or catalog.
            ctxt = dict(ctxt, auth_token=None, service_catalog=[])
        try:
            sealed, sent = seals.sign(self.keyring, target.topic,
                                      target.server, ctxt, message,
                                      reply=bool(wait_for_reply))
        except exception.HostHoldsNoKey:
            if not self.conf.signing.allow_unsigned:
                raise
            # A host of the previous release, which seals nothing, while
            # an upgrade runs.
            sealed, sent = ctxt, None
        trusting = (not wait_for_reply or sent is None
                    or self.conf.signing.allow_unsigned)
        try:
            reply = super()._send(target, sealed, message, wait_for_reply,
                                  *args, **kwargs)
        except Exception as exc:
            # An unsealed failure, as the driver raises it: a refusal of
            # a seal that did not check out, or a forger's.
            if trusting or not _remote(exc):
                raise
            seals.refuse_reply(sent, message.get('method'),
                               exception.safe_message(exc))
        if trusting and not seals.is_sealed(reply):
            # A cast; or, while an upgrade runs, the answer of a server of
            # the previous release.
            return reply
        body = seals.open_reply(self.keyring, sent, message.get('method'),
                                reply)
        if 'failure' in body:
            raise rpc_common.deserialize_remote_exception(body['failure'],
                                                          ALLOWED_EXMODS)
        return body.get('result')


def _remote(exc: Exception) -> bool:
    """Whether ``exc`` came back in a reply (not a timeout, say)."""
    return isinstance(exc, messaging.RemoteError) or type(
        exc).__module__.endswith('_Remote')


def register_host(service: str, host: str) -> None:
    """Record (service, host)'s key, keeping the generation it has: for a
    process that holds the master key and serves that host itself."""
    from volmig.db import host_keys
    host_keys.register(service, host, keep=True)
    transport().keyring.registry.forget()


def _registered_hosts() -> dict:
    # Only the controllers, which hold the master key, read the record:
    # a host's process never imports the database layer.
    from volmig.db import host_keys
    return host_keys.load()


def get_transport(conf, url: str | None = None) -> SignedTransport:
    """A transport whose messages are signed, on ``conf``'s URL or
    ``url``."""
    return messaging.get_rpc_transport(
        conf, url=url, allowed_remote_exmods=ALLOWED_EXMODS,
        transport_cls=SignedTransport)


def signed(rpc_transport) -> SignedTransport:
    """``rpc_transport`` (a caller's own, Cinder's say), signing what it
    sends: its driver, and so its connections, are shared."""
    if isinstance(rpc_transport, SignedTransport):
        return rpc_transport
    return SignedTransport(rpc_transport._driver)


def cleanup() -> None:
    global _TRANSPORT, _NOTIFICATION_TRANSPORT
    for transport_ in (_TRANSPORT, _NOTIFICATION_TRANSPORT):
        if transport_ is not None:
            transport_.cleanup()
    _TRANSPORT = _NOTIFICATION_TRANSPORT = None


def until_answered(ask, what: str):
    """``ask()``'s answer, asked again while it is lost (``LOST``).

    For a request that is safe to repeat, whose caller must not take a
    lost answer for a refusal: a step after which a guest may be on dst.
    Refusals raise at once; whoever owns the migration's deadline (the
    conductor's stall timeout) ends it, and the next answer says so.
    """
    delay = ASK_AGAIN_FIRST
    while True:
        try:
            return ask()
        except LOST as exc:
            LOG.warning('%(what)s: no answer (%(error)s); asking again in '
                        '%(delay).1f s', {'what': what, 'delay': delay,
                                          'error': type(exc).__name__})
        time.sleep(delay)
        delay = min(delay * 2, ASK_AGAIN_MOST)


def transport():
    if _TRANSPORT is None:
        raise RuntimeError('volmig.rpc.init() has not been called')
    return _TRANSPORT


def endpoint(method=None, *, senders: tuple = (), unsigned: bool = False):
    """An RPC method: typed refusals travel back as themselves.

    The controllers may call it, and the kinds of service in ``senders``
    (``signing.COMPUTE``, ``signing.VOLUME``, ``signing.CLIENT``); any
    other sender is refused. While ``[signing] allow_unsigned`` lets
    unsigned messages in, only a method marked ``unsigned`` serves them:
    one that the previous release's agents, volmig-volume and
    block-storage clients call, or that its conductor calls on agents.
    Arguments that do not fit the method (missing, unknown) are refused
    as ``InvalidInput`` before it runs, instead of failing inside it.
    """
    if method is None:
        return functools.partial(endpoint, senders=senders,
                                 unsigned=unsigned)
    signature = inspect.signature(method)

    @functools.wraps(method)
    def checked(self, ctxt, **kwargs):
        began = time.monotonic()
        try:
            return _served(self, ctxt, **kwargs)
        finally:
            metrics.RPC_SECONDS.labels(method=method.__name__).observe(
                time.monotonic() - began)

    def _served(self, ctxt, **kwargs):
        sender = getattr(ctxt, 'sender', None)
        try:
            if isinstance(sender, signing.Unsigned):
                if not unsigned:
                    signing.refuse(method.__name__, None, 'unsigned',
                                   'unsigned: not a method the previous '
                                   'release calls')
            elif sender and sender.service not in (signing.CONTROLLER,
                                                   *senders):
                signing.refuse(method.__name__, sender, 'method',
                               'not a method %s may call' % sender.service)
            signature.bind(self, ctxt, **kwargs)
        except exception.MessageRefused:
            metrics.RPC_ERRORS.labels(method=method.__name__,
                                      error='Refused').inc()
            raise
        except TypeError as exc:
            metrics.RPC_ERRORS.labels(method=method.__name__,
                                      error='InvalidInput').inc()
            raise exception.InvalidInput(field='arguments of %s'
                                         % method.__name__, reason=exc)
        try:
            return method(self, ctxt, **kwargs)
        except exception.VolmigException as exc:
            # A refusal relayed from another service keeps its name.
            error = type(exc).__name__.removesuffix('_Remote')
            metrics.RPC_ERRORS.labels(method=method.__name__,
                                      error=error).inc()
            raise
        except messaging.MessagingTimeout as exc:
            # Said here: a cast has no caller to hear it, and oslo.messaging
            # logs an expected exception at DEBUG only.
            LOG.warning('%s: a call it made went unanswered: %s',
                        method.__name__, exc)
            metrics.RPC_ERRORS.labels(method=method.__name__,
                                      error='ServiceTimeout').inc()
            raise exception.ServiceTimeout(method=method.__name__) from None
        except Exception as exc:
            # oslo.messaging would send anything else with its traceback
            # in the reply's message: the caller gets a typed error, and
            # the traceback stays in this service's log.
            kind = type(exc).__name__.removesuffix('_Remote')
            LOG.exception('%s failed', method.__name__)
            metrics.RPC_ERRORS.labels(method=method.__name__,
                                      error=kind).inc()
            raise exception.UnexpectedError(method=method.__name__,
                                            kind=kind) from None
    wrapped = messaging.expected_exceptions(exception.VolmigException)(
        checked)
    wrapped.rpc_endpoint = True
    return wrapped


class RequestContextSerializer(messaging.Serializer):
    """Sends the request context as a dict and values as JSON primitives."""

    def serialize_entity(self, ctxt, entity):
        return jsonutils.to_primitive(entity, convert_instances=True)

    def deserialize_entity(self, ctxt, entity):
        return entity

    def serialize_context(self, ctxt):
        return ctxt.to_dict()

    def deserialize_context(self, ctxt):
        return volmig_context.RequestContext.from_dict(ctxt)


def get_client(topic: str, version: str, version_cap: str | None = None,
               timeout: int | None = None,
               rpc_transport=None) -> messaging.RPCClient:
    """A client on ``rpc_transport``, or on volmig's own."""
    target = messaging.Target(exchange=EXCHANGE, topic=topic,
                              version=version)
    return messaging.get_rpc_client(
        rpc_transport or transport(), target,
        version_cap=version_cap,
        serializer=RequestContextSerializer(),
        timeout=timeout, retry=_RETRY)


def get_server(topic: str, server: str, endpoints: list):
    target = messaging.Target(topic=topic, server=server)
    rpc_transport = transport()
    checker = seals.Checker(rpc_transport.keyring, topic, server,
                            rpc_transport.conf,
                            dispatch.nonce_store(topic, server))
    return rpc_server.RPCServer(rpc_transport, target,
                                dispatch.CheckingDispatcher(
                                    endpoints, RequestContextSerializer(),
                                    checker))


def get_notifier(publisher_id: str, topic: str) -> messaging.Notifier:
    """A notifier that sends where ``[oslo_messaging_notifications]
    driver`` says; with none named, one whose ``is_enabled()`` is False."""
    if _NOTIFICATION_TRANSPORT is None:
        raise RuntimeError('volmig.rpc.init() has not been called')
    # oslo.messaging reads an empty list of drivers as enabled (it is not
    # ['noop']), so each event's payload was built and sent nowhere: 5 %
    # of the conductor's CPU, measured under 600 migrations.
    named = _NOTIFICATION_TRANSPORT.conf.oslo_messaging_notifications.driver
    return messaging.Notifier(_NOTIFICATION_TRANSPORT,
                              publisher_id=publisher_id, topics=[topic],
                              driver=None if named else 'noop',
                              serializer=RequestContextSerializer())

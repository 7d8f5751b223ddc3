"""What an RPC server does with a message before its method sees it
(``volmig.rpc.get_server``): the seal checked, the reply sealed, and the
context the method runs in made from what the sender may say."""

import os

import oslo_messaging as messaging
from oslo_messaging._drivers import common as rpc_common
from oslo_messaging.rpc import dispatcher

from volmig import context as volmig_context
from volmig import exception
from volmig import signing
from volmig.conf import CONF
from volmig.conf import compute as compute_conf
from volmig.signing import nonces
from volmig.signing import seals


class CheckingDispatcher(dispatcher.RPCDispatcher):
    """Serves only what its sender sealed for this server, seals the reply
    the sender asked for, and tells the method who that sender is
    (``RequestContext.sender``), in a context that carries nothing else
    of a host's."""

    def __init__(self, endpoints, serializer: messaging.Serializer,
                 checker: seals.Checker):
        super().__init__(endpoints, serializer,
                         dispatcher.DefaultRPCAccessPolicy)
        self._checker = checker

    def dispatch(self, incoming):
        try:
            received = self._checker.check(incoming.ctxt, incoming.message)
        except exception.MessageRefused:
            # Answered as a typed refusal, and not logged again with a
            # traceback: the checker logged it once for its sender.
            raise dispatcher.ExpectedException() from None
        if received.reply is not None:
            incoming.reply = _sealing(incoming.reply, received.reply)
        values = received_from(incoming.ctxt, received.sender)
        incoming.ctxt.clear()
        incoming.ctxt.update(values)
        return super().dispatch(incoming)


# What a host's message may carry of a caller: its request ids, to follow
# the request across services. The rest is volmig's own, by the kind of
# sender: block storage has the service persona; an agent's report, and a
# message nobody signed, are volmig's own work.
_KEPT = ('request_id', 'global_request_id')
_BLOCK_STORAGE = (signing.VOLUME, signing.CLIENT)


def received_from(values: dict, sender: signing.Sender) -> dict:
    """The context a received message's method runs in: a controller's as
    it sent it, and for anyone else, no token, catalog or role of theirs
    (``values`` holds only what the sender sealed)."""
    values = {key: value for key, value in values.items()
              if key != signing.SIGNATURE}
    if sender.service != signing.CONTROLLER:
        own = (volmig_context.get_service_context(project_id=None)
               if sender.service in _BLOCK_STORAGE
               else volmig_context.get_admin_context())
        values = dict(own.to_dict(), **{key: values[key] for key in _KEPT
                                        if values.get(key)})
        if sender.service in _BLOCK_STORAGE:
            values['user_id'] = sender.service
    values['sender'] = sender
    return values


def _sealing(reply, seal):
    """``reply`` (the driver's), sending the result or the failure sealed:
    the failure serialized as the driver itself would have sent it."""
    def sealed(result=None, failure=None):
        body = ({'failure': rpc_common.serialize_remote_exception(failure)}
                if failure else {'result': result})
        return reply(seal(body))
    return sealed


def nonce_store(topic: str, server: str):
    """Where the servers of ``topic`` remember what they took
    (``volmig.signing.nonces``): a compute agent, which has no database,
    on its disk; the others in the database they share."""
    if topic == seals.COMPUTE_TOPIC:
        directory = compute_conf.state_path(CONF)
        os.makedirs(directory, exist_ok=True)
        return nonces.Journal(os.path.join(directory,
                                           'rpc-nonces-%s' % server))
    from volmig.db import nonces as db_nonces
    return db_nonces.DatabaseNonces()

"""The block-storage service's client for volmig (public, semver).

A block-storage service (Cinder, or volmig-volume) drives a migration of
an attached volume with it::

    client = MigrationClient()
    migration = client.start(ctxt, src_attachment_id)   # src is frozen
    ...copy src to dst...
    client.complete(ctxt, src_attachment_id, dst_attachment_id)
    # or, on failure: client.cancel(ctxt, src_attachment_id)

The caller needs the ``service`` role; any oslo.context RequestContext
carries it. Refusals raise the typed errors of ``volmig.exception``,
whatever ``allowed_remote_exmods`` the transport was built with.

A service with its own configuration and transport embeds the client
without volmig's global ``CONF``::

    client = MigrationClient(transport=cinder_rpc_transport)
    # or MigrationClient(conf=cinder_conf), which builds a transport from
    # the conf's transport_url (or from ``url``, to reach volmig on a
    # broker of its own), and MigrationClient.close() releases it.

Every message is sealed with the key in the conf's ``[signing] key_file``
(volmig's own conf without either): the key ``volmig-manage key export
--service volmig-client --host HOST`` writes for the caller's host (a
cinder-volume host's ``[DEFAULT] host``); a client given another kind of
key refuses to be built. Replies are taken only sealed by volmig-api.

Semantic versioning: ``__version__`` changes its major number when a
method, argument or returned key is removed or changes meaning; its
minor number when one is added.
"""

import copy
import time
import typing

import oslo_messaging as messaging

from volmig import exception
from volmig import rpc
from volmig import signing
from volmig import states

__version__ = '1.6.0'

TOPIC = 'volmig-api'
RPC_API_VERSION = '1.1'
# From these on, the caller may remove src.
SRC_RELEASED_OR_LATER = states.COMPLETE_REQUESTED - {states.COMPLETING}


class MigrationClient:

    # Whether a lost answer is asked again (``patient``).
    _patient = False

    def __init__(self, transport=None, conf=None,
                 timeout: int | None = None, poll_interval: float = 0.2,
                 url: str | None = None):
        """``transport``: the caller's oslo.messaging RPC transport;
        ``conf``: a ConfigOpts to build one from, on ``url`` if given
        (else the conf's ``transport_url``). With neither, volmig's own
        (``volmig.rpc.init``)."""
        self._owned = None
        if transport is None and conf is not None:
            transport = self._owned = rpc.get_transport(conf, url=url)
        if transport is not None:
            _register_lazy_opts(transport.conf)
            transport = rpc.signed(transport)
            # A block-storage host's own key: never the controllers'.
            transport.keyring.require(signing.CLIENT)
        self._client = rpc.get_client(TOPIC, RPC_API_VERSION,
                                      timeout=timeout,
                                      rpc_transport=transport)
        self._poll_interval = poll_interval

    def close(self) -> None:
        """Release the transport the client built from ``conf``."""
        if self._owned is not None:
            self._owned.cleanup()
            self._owned = None

    def patient(self) -> 'MigrationClient':
        """This client, asking again while an answer is lost.

        Each call but ``start`` whose answer does not come back
        (``MessagingTimeout``, ``ServiceTimeout``: volmig-api or its
        conductor restarting) is asked again, with backoff, until one
        does; refusals raise as ever. For a caller that must not take
        "no answer" for "failed": once a complete may have switched a
        guest, only the migration's own end is an answer. ``start`` is
        never asked again: its lost answer may have started the
        migration, which the caller cancels instead.
        """
        patient = copy.copy(self)
        patient._patient = True
        return patient

    def _ask(self, ctxt, method, **kwargs):
        if not self._patient or method == 'migration_start':
            return self._call(ctxt, method, **kwargs)
        return rpc.until_answered(
            lambda: self._call(ctxt, method, **kwargs), method)

    def _call(self, ctxt, method, version='1.0', **kwargs):
        try:
            return self._client.prepare(version=version).call(ctxt, method,
                                                               **kwargs)
        except messaging.RemoteError as exc:
            raise _typed(exc) from None

    def start(self, ctxt, src_attachment_id: str, wait: bool = True,
              timeout: float = float('inf')) -> dict:
        """Stop every write to src; returns the started migration.

        A start over a concurrency cap is ``queued``. With ``wait`` (the
        default) this returns once it has started, so the contract holds:
        on return, nothing writes to src. Without, a queued migration
        returns at once; ``wait_for`` it to be ``started`` before copying.
        """
        migration = self._ask(ctxt, 'migration_start',
                               src_attachment_id=src_attachment_id)
        if not wait or migration['status'] != states.QUEUED:
            return migration
        return self.wait_for(ctxt, migration['id'], states.STARTED, timeout)

    def cancel(self, ctxt, src_attachment_id: str) -> dict:
        """Send the guest back to src; returns once accepted.

        The overlay is merged back into src asynchronously; ``wait_for``
        the status ``cancelled`` to see the end of it.
        """
        return self._ask(ctxt, 'migration_cancel',
                          src_attachment_id=src_attachment_id)

    def complete(self, ctxt, src_attachment_id: str, dst_attachment_id: str,
                 wait: bool = True, timeout: float = 300) -> dict:
        """Switch the guest to dst, which must be a copy of src at start.

        With ``wait`` (the default) it returns when src may be removed;
        the commit into dst goes on as a tracked job.
        """
        migration = self._ask(ctxt, 'migration_complete',
                               src_attachment_id=src_attachment_id,
                               dst_attachment_id=dst_attachment_id)
        if not wait:
            return migration
        return self.wait_for(ctxt, migration['id'], SRC_RELEASED_OR_LATER,
                             timeout)

    def get(self, ctxt, migration_ref: str) -> dict:
        """By migration id, or the latest migration of a src attachment."""
        return self._ask(ctxt, 'migration_get', migration_ref=migration_ref)

    def list(self, ctxt, limit: int | None = None, marker: str | None = None,
             **filters) -> list[dict]:
        """Filters: status, instance_uuid, volume_id, host. With ``limit``
        or ``marker`` (volmig-api RPC 1.1): at most ``limit`` migrations,
        oldest first, after the migration ``marker``."""
        if limit is None and marker is None:
            return self._ask(ctxt, 'migration_list', filters=filters)
        return self._ask(ctxt, 'migration_list', version='1.1',
                         filters=filters, limit=limit, marker=marker)

    def wait_for(self, ctxt, migration_id: str, statuses,
                 timeout: float = 300,
                 poll_intervals: typing.Iterable[float] = ()) -> dict:
        """Poll until the migration reaches one of ``statuses``: the
        first pauses between asks are ``poll_intervals``, the rest the
        client's own.

        Raises MigrationFailed if it ends in error, or in another
        terminal status first.
        """
        wanted = frozenset([statuses] if isinstance(statuses, str)
                           else statuses)
        deadline = time.monotonic() + timeout
        pauses = iter(poll_intervals)
        while True:
            migration = self.get(ctxt, migration_id)
            if migration['status'] in wanted:
                return migration
            if (migration['status'] in states.TERMINAL
                    or time.monotonic() > deadline):
                raise exception.MigrationFailed(
                    migration_id=migration_id,
                    reason=migration['error_reason'] or
                    'it is %s, not %s' % (migration['status'],
                                          ' or '.join(sorted(wanted))))
            time.sleep(next(pauses, self._poll_interval))


def _register_lazy_opts(conf) -> None:
    """oslo.messaging's clients read ``[oslo_messaging_tracing]`` and
    ``[oslo_messaging_metrics]``, which it registers on the global CONF
    only; a service's own ConfigOpts lacks them, and every call would
    fail with NoSuchOptError."""
    from oslo_messaging._metrics import client as metrics
    from oslo_messaging._tracing import client as tracing
    for group, group_opts in (
            ('oslo_messaging_tracing', tracing.oslo_messaging_tracing),
            ('oslo_messaging_metrics', metrics.oslo_messaging_metrics)):
        if group not in conf:
            conf.register_opts(group_opts, group=group)


def _typed(error: messaging.RemoteError) -> Exception:
    """A refusal from a transport that does not deserialize volmig's
    exceptions, as the typed error volmig raised."""
    kind = getattr(exception, error.exc_type or '', None)
    if isinstance(kind, type) and issubclass(kind, exception.VolmigException):
        return kind(error.value)
    return error

"""A start sent to its agent, and the agent's answer recorded.

One routine for both ways a start reaches its agent: volmig-api runs it
for a start that goes straight through, and the conductor runs it for one
that its queue releases. The conductor runs it itself rather than handing
the released start to volmig-api's RPC face: that would add a round trip
and make the queue drain only while volmig-api is up, for the same steps.

While it waits on the agent, the caller owns the start (volmig.owners):
nobody else reconciles it. When the call times out, the caller releases
it, and the healer asks the agent to settle it.
"""

import typing

from oslo_log import log as logging
import oslo_messaging as messaging

from volmig import exception
from volmig import states

LOG = logging.getLogger(__name__)


class Recorder(typing.Protocol):
    """Where the answer is recorded: the conductor, or its RPC API."""

    def started(self, ctxt, migration_id: str, pauses: dict) -> dict: ...

    def fail(self, ctxt, migration_id: str, reason: str,
             recovery_needed: bool) -> dict: ...

    def release(self, ctxt, migration_id: str) -> None: ...


def run(ctxt, compute_api, recorder: Recorder, migration: dict,
        bdm: dict) -> dict:
    """Send ``migration``'s start to its agent and record the answer.

    A migration recorded ``accepted`` goes to an agent older than compute
    RPC 1.3, which reports its own start.
    """
    owned = migration['status'] == states.STARTING
    try:
        result = compute_api.migration_start(ctxt, migration['host'],
                                             migration, bdm)
    except messaging.MessagingTimeout:
        # The agent may have put the guest on an overlay before it went
        # silent. The migration stays "starting": the agent rolls it back
        # when it reconciles, at its restart or when the conductor asks.
        if owned:
            _release(ctxt, recorder, migration)
        raise exception.ComputeUnavailable(host=migration['host'],
                                           action='migration_start')
    except exception.VolmigException as exc:
        if owned:
            # The agent undid what it did: the guest is on src.
            recorder.fail(ctxt, migration['id'], exc.message,
                          recovery_needed=False)
        raise
    if not owned:
        return result
    return recorder.started(ctxt, migration['id'], result['pauses'])


def _release(ctxt, recorder: Recorder, migration: dict) -> None:
    try:
        recorder.release(ctxt, migration['id'])
    except Exception:
        # Still owned: it is reconciled once this process's generation
        # ends (a restart) instead of now.
        LOG.exception('Could not hand volume migration %s over to the '
                      'healer', migration['id'])

"""State names, and the volume-migration state machine
(doc/source/design.rst, "State and recovery").

Every status that is not terminal counts as in progress.
"""

from volmig import exception

# Volume migration statuses.
# Held back by a concurrency cap; no agent has heard of it yet.
QUEUED = 'queued'
ACCEPTED = 'accepted'
STARTING = 'starting'
STARTED = 'started'
CANCELLING = 'cancelling'
CANCELLED = 'cancelled'
COMPLETING = 'completing'
SRC_RELEASED = 'src_released'
COMMITTING = 'committing'
COMPLETED = 'completed'
ERROR = 'error'

_TRANSITIONS = {
    # Started in order as caps allow (RPC agents older than 1.3 report
    # their own start from accepted); cancelled without any agent.
    QUEUED: {ACCEPTED, STARTING, CANCELLED},
    ACCEPTED: {STARTING},
    STARTING: {STARTED},
    STARTED: {CANCELLING, COMPLETING},
    CANCELLING: {CANCELLED},
    # Back to started only when dst could not be connected, before the
    # complete was sent to any agent.
    COMPLETING: {SRC_RELEASED, STARTED},
    # A commit with nothing to merge ends before it reports any progress.
    SRC_RELEASED: {COMMITTING, COMPLETED},
    COMMITTING: {COMPLETED},
    CANCELLED: set(),
    COMPLETED: set(),
    ERROR: set(),
}

TERMINAL = frozenset({CANCELLED, COMPLETED, ERROR})
IN_PROGRESS = frozenset(set(_TRANSITIONS) - TERMINAL)
ALL = frozenset(_TRANSITIONS)
# From these on, the guest has been switched to dst (or is being switched).
COMPLETE_REQUESTED = frozenset({COMPLETING, SRC_RELEASED, COMMITTING,
                                COMPLETED})
# What a migration may be recorded in when it begins.
INITIAL = frozenset({QUEUED, ACCEPTED, STARTING})
# Statuses no agent has been asked to act on yet.
NOT_SENT = frozenset({QUEUED, ACCEPTED})
# Statuses in which a compute agent is doing work for the migration, as
# opposed to waiting for the block-storage service (STARTED).
AGENT_BUSY = frozenset({STARTING, CANCELLING, COMPLETING, SRC_RELEASED,
                        COMMITTING})
# What an agent reports when the job of a migration ends, by status.
JOB_ENDS = {CANCELLING: CANCELLED, COMPLETING: COMPLETED,
            SRC_RELEASED: COMPLETED, COMMITTING: COMPLETED}

MODE_LIVE = 'live'
MODE_OFFLINE = 'offline'


def can_transition(old: str, new: str) -> bool:
    if new == ERROR:
        return old not in TERMINAL
    return new in _TRANSITIONS[old]


def check_transition(migration_id: str, old: str, new: str) -> None:
    if new not in ALL:
        raise exception.InvalidInput(field='status',
                                     reason='unknown status %r' % new)
    if not can_transition(old, new):
        raise exception.InvalidMigrationState(
            action='move to %s' % new, migration_id=migration_id,
            status=old)


# Cinder's migration of an attached volume, one move per old and new
# volume (volmig.conductor.cinder_moves has the steps).
MOVE_REQUESTED, MOVE_STARTING = 'requested', 'starting'
MOVE_COPYING, MOVE_COMPLETING, MOVE_RELEASING = ('copying', 'completing',
                                                 'releasing')
MOVE_NOTIFYING, MOVE_FAILING = 'notifying', 'failing'
MOVE_DONE, MOVE_FAILED = 'done', 'failed'

_MOVE_TRANSITIONS = {
    # Up to the copy, a failure rolls back (failing, then Cinder hears
    # error: true); from completing on, it is retried, never rolled back.
    MOVE_REQUESTED: {MOVE_STARTING, MOVE_FAILING},
    MOVE_STARTING: {MOVE_COPYING, MOVE_FAILING},
    MOVE_COPYING: {MOVE_COMPLETING, MOVE_FAILING},
    MOVE_COMPLETING: {MOVE_RELEASING},
    MOVE_RELEASING: {MOVE_NOTIFYING},
    MOVE_NOTIFYING: {MOVE_DONE},
    MOVE_FAILING: {MOVE_FAILED},
    MOVE_DONE: set(),
    MOVE_FAILED: set(),
}


def check_move_transition(move_id: str, old: str, new: str) -> None:
    if new not in _MOVE_TRANSITIONS.get(old, ()):
        raise exception.Conflict(
            reason='volume move %s cannot go from %s to %s'
            % (move_id, old, new))


# A pool move's statuses on its volume (``migration_status``: Cinder's
# words, and ``queued`` while the copy cap holds it back);
# volmig.volume_service.pool_moves has the steps.
POOL_MOVE_QUEUED = 'queued'
POOL_MOVE_STARTING = 'starting'
POOL_MOVE_MIGRATING = 'migrating'
# Holding a copy slot. It has started, or is starting, every attachment
# it found: a new one would be left on src, which the move then deletes.
POOL_MOVE_COPYING = (POOL_MOVE_STARTING, POOL_MOVE_MIGRATING)
# Copying, or waiting for a pool's copy slot.
POOL_MOVE_UNDER_WAY = POOL_MOVE_COPYING + (POOL_MOVE_QUEUED,)


# Instance states.
VM_BUILDING = 'building'
VM_ACTIVE = 'active'
VM_STOPPED = 'stopped'
VM_ERROR = 'error'
VM_DELETED = 'deleted'

POWER_NOSTATE = 'nostate'
POWER_RUNNING = 'running'
POWER_SHUTDOWN = 'shutdown'

TASK_VOLUME_MIGRATING = 'volume_migrating'
TASK_POWERING_OFF = 'powering-off'
TASK_POWERING_ON = 'powering-on'
TASK_DELETING = 'deleting'
TASK_ATTACHING = 'attaching_volume'
TASK_DETACHING = 'detaching_volume'
TASK_SWAPPING = 'swapping_volume'

# A block-storage attachment's statuses, as Cinder names them.
ATTACH_RESERVED = 'reserved'
ATTACH_ATTACHING = 'attaching'
ATTACH_ATTACHED = 'attached'

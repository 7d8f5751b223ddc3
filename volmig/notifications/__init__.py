"""Versioned notifications (doc/source/design.rst, "Contracts").

They go to the ``versioned_notifications`` topic through oslo.messaging's
notifier; ``[oslo_messaging_notifications] driver = messagingv2`` turns
them on (oslo.messaging's default sends nothing). Each payload is a
versioned object (``objects``: oslo.versionedobjects) in Nova's
envelope, and ``doc/notification_samples`` has a sample of each event,
which the tests hold the code to.
"""

import contextlib

from oslo_log import log as logging
import oslo_messaging as messaging

from volmig import exception
from volmig import rpc
from volmig.notifications import objects

LOG = logging.getLogger(__name__)

TOPIC = 'versioned_notifications'

# A migration's events, as the agent sends them.
MIGRATION_START = 'volume_migration.start'
MIGRATION_CANCEL = 'volume_migration.cancel'
MIGRATION_COMPLETE = 'volume_migration.complete'
# Each status the conductor records (phase ``update``).
MIGRATION = 'volume_migration'
# A pool's drain (phases ``start`` and ``end``), and each of its volumes
# (phase ``volume``), from volmig-volume.
DRAIN = 'volume_pool.drain'
# A service gone silent (phase ``down``), or heard again (``up``).
SERVICE = 'service'

# Event type (without the phase) -> its payload.
PAYLOADS: dict[str, type[objects.Payload]] = {
    'instance.create': objects.InstanceCreatePayload,
    'instance.volume_attach': objects.InstanceActionVolumePayload,
    'instance.volume_swap': objects.InstanceActionVolumeSwapPayload,
    MIGRATION_START: objects.VolumeMigrationPayload,
    MIGRATION_CANCEL: objects.VolumeMigrationPayload,
    MIGRATION_COMPLETE: objects.VolumeMigrationPayload,
    MIGRATION: objects.VolumeMigrationUpdatePayload,
    DRAIN: objects.DrainPayload,
    SERVICE: objects.ServiceStatusPayload,
}
# A payload of another class than its event's, by event type.
PHASE_PAYLOADS: dict[str, type[objects.Payload]] = {
    DRAIN + '.volume': objects.DrainVolumePayload,
}

INSTANCE_FIELDS = ('uuid', 'name', 'host', 'project_id', 'user_id',
                   'vm_state', 'power_state', 'task_state')
MIGRATION_FIELDS = ('id', 'instance_uuid', 'volume_id', 'src_attachment_id',
                    'dst_attachment_id', 'mode', 'host', 'status')


def instance_data(instance: dict, **extra) -> dict:
    return dict({field: instance.get(field) for field in INSTANCE_FIELDS},
                **extra)


def migration_data(migration: dict) -> dict:
    return {field: migration.get(field) for field in MIGRATION_FIELDS}


class Notifier:

    def __init__(self, publisher_id: str):
        self.publisher_id = publisher_id
        self._notifier: messaging.Notifier | None = None

    def notify(self, ctxt, event: str, phase: str, data: dict,
               exc: Exception | None = None, error: bool = False) -> None:
        """Send ``event.phase``, at priority ERROR for an ``error`` phase
        or ``error``; a notification never fails the work."""
        if exc is not None:
            data = dict(data, fault={
                'exception': type(exc).__name__,
                'exception_message': exception.safe_message(exc)})
        try:
            if self._notifier is None:
                self._notifier = rpc.get_notifier(self.publisher_id, TOPIC)
            notifier = self._notifier
            if not notifier.is_enabled():
                return  # No driver: the payload would cost for nothing.
            made = PHASE_PAYLOADS.get('%s.%s' % (event, phase),
                                      PAYLOADS[event]).of(data)
            # Every field of a new object reads as changed: that says
            # nothing, so it is not sent.
            made.obj_reset_changes(recursive=True)
            send = (notifier.error if error or phase == 'error'
                    else notifier.info)
            send(ctxt, '%s.%s' % (event, phase), made.obj_to_primitive())
        except Exception:
            LOG.exception('Could not send notification %s.%s', event, phase)

    @contextlib.contextmanager
    def around(self, ctxt, event: str, data: dict):
        """``start`` now, then ``end``, or ``error`` if the body raises."""
        self.notify(ctxt, event, 'start', data)
        try:
            yield
        except Exception as exc:
            self.notify(ctxt, event, 'error', data, exc)
            raise
        self.notify(ctxt, event, 'end', data)

"""The payloads of volmig's versioned notifications, as oslo.versionedobjects
objects, as Nova's are.

A payload's fields are its contract with consumers: a field added,
removed or retyped changes the object's fingerprint, and
``tests/unit/test_notification_objects.py`` fails until its version is
bumped with it (and ``doc/notification_samples`` follows).
"""

import typing

from oslo_versionedobjects import base
from oslo_versionedobjects import fields


class VolmigObject(base.VersionedObject):
    """The namespace every payload is serialized in:
    ``volmig_object.name``, ``.namespace``, ``.version`` and ``.data``."""

    OBJ_SERIAL_NAMESPACE = 'volmig_object'
    OBJ_PROJECT_NAMESPACE = 'volmig'


class Payload(VolmigObject):
    """A notification's payload, made from the dict its sender has."""

    @classmethod
    def of(cls, data: dict) -> 'Payload':
        """The payload of ``data``; a nested payload's field takes the
        dict of that payload (a list field, a list of them)."""
        payload = cls()
        for name, value in data.items():
            nested = getattr(cls.fields[name], 'objname', None)
            if nested is not None and value is not None:
                # The newest version of the nested class: the one here.
                made = typing.cast(type[Payload], base.VersionedObjectRegistry
                                   .obj_classes()[nested][0]).of
                value = ([made(item) for item in value]
                         if isinstance(value, list) else made(value))
            setattr(payload, name, value)
        return payload


@base.VersionedObjectRegistry.register
class ExceptionPayload(Payload):
    """Why an ``error`` phase ended: the exception's class and message
    (never a traceback)."""

    VERSION = '1.0'
    fields = {
        'exception': fields.StringField(),
        'exception_message': fields.StringField(),
    }


INSTANCE_FIELDS: dict[str, fields.Field] = {
    'uuid': fields.UUIDField(),
    'name': fields.StringField(nullable=True),
    'host': fields.StringField(nullable=True),
    'project_id': fields.StringField(nullable=True),
    'user_id': fields.StringField(nullable=True),
    'vm_state': fields.StringField(nullable=True),
    'power_state': fields.StringField(nullable=True),
    'task_state': fields.StringField(nullable=True),
    'fault': fields.ObjectField('ExceptionPayload', nullable=True),
}


@base.VersionedObjectRegistry.register
class BlockDevicePayload(Payload):
    """One volume of a server being built."""

    VERSION = '1.0'
    fields = {
        'volume_id': fields.UUIDField(),
        'attach_mode': fields.StringField(),
        'boot_index': fields.IntegerField(nullable=True),
    }


@base.VersionedObjectRegistry.register
class InstanceCreatePayload(Payload):
    # 1.0: a dict's fields, block_devices a list of dicts
    # 1.1: an object, block_devices BlockDevicePayload, fault
    #      ExceptionPayload
    VERSION = '1.1'
    fields = dict(INSTANCE_FIELDS, block_devices=fields.ListOfObjectsField(
        'BlockDevicePayload'))


@base.VersionedObjectRegistry.register
class InstanceActionVolumePayload(Payload):
    # 1.1: an object, fault ExceptionPayload
    VERSION = '1.1'
    fields = dict(INSTANCE_FIELDS, volume_id=fields.UUIDField(),
                  attach_mode=fields.StringField())


@base.VersionedObjectRegistry.register
class InstanceActionVolumeSwapPayload(Payload):
    # 1.1: an object, fault ExceptionPayload
    VERSION = '1.1'
    fields = dict(INSTANCE_FIELDS, old_volume_id=fields.UUIDField(),
                  new_volume_id=fields.UUIDField(),
                  attach_mode=fields.StringField())


MIGRATION_FIELDS: dict[str, fields.Field] = {
    'id': fields.UUIDField(),
    'instance_uuid': fields.UUIDField(),
    'volume_id': fields.UUIDField(),
    'src_attachment_id': fields.UUIDField(),
    'dst_attachment_id': fields.UUIDField(nullable=True),
    'mode': fields.StringField(),
    'host': fields.StringField(),
    'status': fields.StringField(),
}


@base.VersionedObjectRegistry.register
class VolumeMigrationPayload(Payload):
    # 1.1: an object, fault ExceptionPayload
    VERSION = '1.1'
    fields = dict(MIGRATION_FIELDS, fault=fields.ObjectField(
        'ExceptionPayload', nullable=True))


@base.VersionedObjectRegistry.register
class ServiceStatusPayload(Payload):
    """A service that went down (silent past ``service_down_time``) or
    came back: when it was last heard from."""

    VERSION = '1.0'
    fields = {
        'host': fields.StringField(),
        'binary': fields.StringField(),
        'version': fields.StringField(),
        'disabled': fields.BooleanField(),
        'last_seen_at': fields.DateTimeField(),
    }


@base.VersionedObjectRegistry.register
class DrainPayload(Payload):
    """A pool's drain, as it starts and as it ends: its volumes counted
    by state (``pending``, ``migrating``, ``done``, ...)."""

    VERSION = '1.0'
    fields = {
        'id': fields.UUIDField(),
        'host': fields.StringField(),
        'pool': fields.StringField(),
        'target_pool': fields.StringField(),
        'status': fields.StringField(),
        'max_parallel': fields.IntegerField(),
        'volumes': fields.DictOfIntegersField(),
    }


@base.VersionedObjectRegistry.register
class DrainVolumePayload(Payload):
    """One volume of a drain, each time its state changes: how it moves
    (``action``), where it is (``state``), why, and its servers."""

    VERSION = '1.0'
    fields = {
        'drain_id': fields.UUIDField(),
        'host': fields.StringField(),
        'pool': fields.StringField(),
        'target_pool': fields.StringField(),
        'volume_id': fields.UUIDField(),
        'action': fields.StringField(),
        'state': fields.StringField(),
        'old_state': fields.StringField(nullable=True),
        'reason': fields.StringField(nullable=True),
        'instance_uuids': fields.ListOfStringsField(),
    }


@base.VersionedObjectRegistry.register
class VolumeMigrationUpdatePayload(Payload):
    """A status the conductor recorded, and the one it replaced (none for
    a new migration); a failure's phase and reason."""

    VERSION = '1.0'
    fields = dict(MIGRATION_FIELDS,
                  old_status=fields.StringField(nullable=True),
                  error_phase=fields.StringField(nullable=True),
                  error_reason=fields.StringField(nullable=True))

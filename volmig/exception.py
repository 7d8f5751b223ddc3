"""Typed errors. Each carries the HTTP code a REST caller would see.

These cross RPC as themselves: managers list them in
``expected_exceptions`` and clients allow this module in
``allowed_remote_exmods``.
"""


def safe_message(exc: BaseException) -> str:
    """What may be shown to a caller: never a traceback.

    An exception that crossed RPC carries the remote traceback in its
    ``str()``; its first argument is still the message it was raised with.
    """
    if isinstance(exc, VolmigException):
        return exc.message
    return str(exc).split('\n', 1)[0]


class VolmigException(Exception):
    """Base class. ``msg_fmt`` is filled from the keyword arguments."""

    msg_fmt = 'An unknown error occurred.'
    code = 500

    def __init__(self, message: str | None = None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            message = self.msg_fmt % kwargs
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self.args[0])


class ConfigurationError(VolmigException):
    msg_fmt = 'Invalid configuration: %(reason)s'


class HostHoldsNoKey(ConfigurationError):
    """A message to a host that holds no signing key cannot be sealed."""


class DriverNotConfigured(ConfigurationError):
    msg_fmt = ('[compute] driver is not set. Set it to "qemu" or "libvirt"; '
               '"fake" keeps guests in memory and moves no data, for tests '
               'only.')


class UnknownDriver(ConfigurationError):
    msg_fmt = '[compute] driver "%(name)s" is not one of: %(known)s.'


class Invalid(VolmigException):
    msg_fmt = 'Invalid request: %(reason)s'
    code = 400


class InvalidInput(Invalid):
    msg_fmt = 'Invalid input for %(field)s: %(reason)s'


class MarkerNotFound(Invalid):
    msg_fmt = 'marker [%(marker)s] not found'


class InvalidAttachMode(Invalid):
    msg_fmt = ('Invalid attach_mode %(mode)r: it must be the string "rw" '
               'or "ro".')


class MultiattachNotSupported(Invalid):
    msg_fmt = ('Volume %(volume_id)s is not multiattach and is already '
               'attached to server %(instance_uuid)s.')


class MultiCreateNeedsMultiattach(Invalid):
    msg_fmt = ('Creating %(count)d servers that share volume %(volume_id)s '
               'needs a multiattach volume.')


class MultiattachNeedsMicroversion(Invalid):
    msg_fmt = ('Volume %(volume_id)s is multiattach: to %(what)s, ask for '
               'compute API microversion %(version)s or later.')


class MigrationNotSupported(Invalid):
    msg_fmt = ('The block-storage backend %(backend)s cannot migrate '
               'volumes.')


class MultiattachMigrationNotSupported(Invalid):
    msg_fmt = ('Volume %(volume_id)s has %(count)d attachments and at least '
               'one is read/write; it can only be migrated when every '
               'attached server is shut off.')


class MultiattachSwapNotSupported(Invalid):
    msg_fmt = ('Volume %(volume_id)s has %(count)d attachments and at least '
               'one is read/write: swapping it on one server would fork it '
               'between servers. Migrate the volume instead.')


class VolumeProtocolNotSupported(Invalid):
    msg_fmt = ('Volumes connected over %(protocol)r cannot be opened on '
               'this host; volmig connects %(supported)s.')


class BlockStorageRefused(Invalid):
    msg_fmt = 'The block-storage service refused to %(action)s: %(reason)s'


class Forbidden(VolmigException):
    msg_fmt = 'Policy does not allow %(action)s.'
    code = 403


class MessageRefused(Forbidden):
    """An RPC message its receiver does not serve: unsigned, forged,
    stale, replayed, or from a sender that may not ask it."""
    msg_fmt = 'Refused %(method)s from %(sender)s: %(reason)s.'


class ReplyRefused(MessageRefused):
    """A reply to a call that the server called did not seal: never taken
    as an answer."""
    msg_fmt = 'Refused the reply to %(method)s from %(sender)s: %(reason)s.'


class NotFound(VolmigException):
    msg_fmt = 'Resource could not be found.'
    code = 404


class InstanceNotFound(NotFound):
    msg_fmt = 'Server %(instance_uuid)s could not be found.'


class ImageNotFound(NotFound):
    msg_fmt = 'Image %(image)s could not be found.'


class VolumeNotFound(NotFound):
    msg_fmt = 'Volume %(volume_id)s could not be found.'


class AttachmentNotFound(NotFound):
    msg_fmt = 'Volume attachment %(attachment_id)s could not be found.'


class VolumeNotAttached(NotFound):
    msg_fmt = ('Volume %(volume_id)s is not attached to server '
               '%(instance_uuid)s.')


class MigrationNotFound(NotFound):
    msg_fmt = 'Volume migration %(migration_id)s could not be found.'


class ServiceNotFound(NotFound):
    msg_fmt = 'No %(binary)s service is registered on host %(host)s.'


class DrainNotFound(NotFound):
    msg_fmt = 'Pool %(pool)s has never been drained.'


class Conflict(VolmigException):
    msg_fmt = 'The request conflicts with the current state: %(reason)s'
    code = 409


class BlockStorageConflict(Conflict):
    msg_fmt = 'The block-storage service refused to %(action)s: %(reason)s'


class NoCopySlot(Conflict):
    msg_fmt = ('Pool %(pool)s has no copy slot free ([storage] '
               'max_concurrent_copies).')


class NoDrainRunning(Conflict):
    msg_fmt = 'Pool %(pool)s has no drain running.'


class DrainRunning(Conflict):
    msg_fmt = ('Pool %(pool)s is being drained into %(target)s already '
               '(drain %(drain_id)s); cancel it first.')


class MigrationInProgress(Conflict):
    msg_fmt = ('A volume migration or another task is in progress on '
               '%(what)s (%(reason)s).')


class VolumeStatusChanged(Conflict):
    msg_fmt = ('Volume %(volume_id)s changed while this request ran: its '
               'migration status is now %(status)s. Try again.')


class InstanceInvalidState(Conflict):
    msg_fmt = ('Cannot %(action)s server %(instance_uuid)s while it is in '
               'task_state %(task_state)s.')


class InstanceMustBeShutOff(Conflict):
    msg_fmt = ('The compute driver on host %(host)s cannot migrate the '
               'volume of running server %(instance_uuid)s live; shut the '
               'server off first.')


class InvalidMigrationState(Conflict):
    msg_fmt = ('Cannot %(action)s volume migration %(migration_id)s in '
               'status %(status)s.')


class MigrationStatusMoved(InvalidMigrationState):
    """A status write found another status than the one it replaces: a
    writer that read the status first read it stale, and reads it again
    (``volmig.db.engine.rereads``)."""


class MigrationRecoveryRefused(Conflict):
    msg_fmt = ('Cannot %(action)s volume migration %(migration_id)s: '
               '%(reason)s.')


class ComputeTooOld(Conflict):
    msg_fmt = ('The compute agent on host %(host)s is too old for '
               '%(feature)s (it needs compute RPC %(needed)s).')


class ServiceTooOld(Conflict):
    msg_fmt = ('%(service)s is too old for %(feature)s (it needs RPC '
               '%(needed)s); upgrade it first.')


class ServiceIsUp(Conflict):
    msg_fmt = ('%(binary)s on host %(host)s is up: stop it first, or its next '
               'heartbeat registers it again.')


class ServiceInUse(Conflict):
    msg_fmt = ('%(binary)s on host %(host)s still has %(count)d server(s): '
               'delete them first.')


class NoValidHost(Conflict):
    msg_fmt = 'No compute agent can take the request: %(reason)s'


class ComputeUnavailable(VolmigException):
    msg_fmt = ('The compute agent on host %(host)s did not answer '
               '%(action)s.')
    code = 503


class ServiceTimeout(VolmigException):
    msg_fmt = ('A service that %(method)s waits on did not answer in '
               'time; try again.')
    code = 503


class UnexpectedError(VolmigException):
    msg_fmt = ('%(method)s failed unexpectedly (%(kind)s); the log of the '
               'service that answered has the details.')


class BlockStorageUnavailable(VolmigException):
    msg_fmt = ('The block-storage service did not %(action)s: %(reason)s')
    code = 503


class MigrationFailed(VolmigException):
    msg_fmt = 'Volume migration %(migration_id)s failed: %(reason)s'


class DriverError(VolmigException):
    msg_fmt = 'The compute driver failed to %(action)s: %(reason)s'


class MonitorError(DriverError):
    msg_fmt = 'QEMU refused %(command)s on guest %(guest)s: %(reason)s'


class DestinationMismatch(Invalid):
    msg_fmt = ('The destination %(what)s does not match the source of '
               'volume migration %(migration_id)s: %(reason)s')


class VolumeTooLarge(Invalid):
    msg_fmt = ('A volume of %(size_mb)d MiB does not fit pool %(pool)s, '
               'whose file system holds %(capacity_mb)d MiB.')


class PoolNotFound(NotFound):
    msg_fmt = 'Storage pool %(pool)s does not exist.'


class CopyMismatch(VolmigException):
    msg_fmt = ('The copy of volume %(volume_id)s differs from its source '
               '(%(difference)s).')


class NovaRefused(Invalid):
    msg_fmt = 'Nova refused to %(action)s: %(reason)s'


class NovaUnavailable(VolmigException):
    msg_fmt = 'Nova did not %(action)s: %(reason)s'
    code = 503


class SwapNotVerified(VolmigException):
    msg_fmt = ("Cinder moved volume %(volume_id)s, but server "
               "%(server_id)s is not on it: %(reason)s")


class ServerNotStopped(Conflict):
    msg_fmt = ('Server %(server_id)s is %(status)s: it must stay stopped '
               'while its volume moves offline.')

"""What volmig needs from a block-storage service, Cinder-shaped.

Attachments follow Cinder's v3 attachment flow: ``attachment_create``
reserves, ``attachment_update`` with a host connector returns the
connection info, ``attachment_complete`` marks it attached.
"""

import abc

from oslo_log import log as logging

from volmig import exception

LOG = logging.getLogger(__name__)


class VolumeAdapter(abc.ABC):

    @abc.abstractmethod
    def create_volume(self, ctxt, size_mb: int, name: str | None = None,
                      multiattach: bool = False,
                      pool: str | None = None) -> dict:
        """Create a volume and return it."""

    @abc.abstractmethod
    def get_volume(self, ctxt, volume_id: str) -> dict:
        """Return the volume with its ``attachments``.

        Each attachment has ``id``, ``instance_uuid``, ``attach_mode`` and
        ``attach_status``. Raises VolumeNotFound.
        """

    def volume_of_attachment(self, ctxt, volume_id: str,
                             attachment_id: str) -> dict:
        """The volume that ``attachment_id`` is on now, from the one it
        was attached to (``volume_id``), with its attachments.

        A complete keeps a mapping's volume id, since Cinder gives the new
        data the old volume's id. A block-storage service that completes
        onto another volume's attachment and keeps that volume moves the
        attachment to another id: the next start must see that volume,
        not the one the guest no longer uses.
        """
        volume = self.get_volume(ctxt, volume_id)
        if any(attachment['id'] == attachment_id
               for attachment in volume['attachments']):
            return volume
        moved_to = self.attachment_get(ctxt, attachment_id)['volume_id']
        if moved_to == volume_id:
            return volume
        LOG.info('Attachment %(attachment)s is on volume %(new)s now, not '
                 '%(old)s', {'attachment': attachment_id, 'new': moved_to,
                             'old': volume_id})
        return self.get_volume(ctxt, moved_to)

    def with_database(self) -> 'VolumeAdapter':
        """This adapter in a process that has volmig's database (the
        conductor): the same one, unless the block-storage service keeps
        its records in that database."""
        return self

    def volume_size_mb(self, ctxt, volume_id: str) -> int:
        """The volume's size, for a check that needs nothing else; an
        adapter that reads it alone, in fewer requests, overrides this.
        Raises VolumeNotFound."""
        return self.get_volume(ctxt, volume_id)['size_mb']

    @abc.abstractmethod
    def list_volumes(self, ctxt, limit: int | None = None,
                     marker: str | None = None) -> list[dict]:
        """Every volume the context may see, oldest first; a page of
        ``limit`` after the volume ``marker``."""

    @abc.abstractmethod
    def delete_volume(self, ctxt, volume_id: str) -> None:
        """Delete an unattached volume."""

    @abc.abstractmethod
    def attachment_create(self, ctxt, volume_id: str, instance_uuid: str,
                          mode: str = 'rw') -> dict:
        """Reserve the volume for an instance; returns the attachment."""

    @abc.abstractmethod
    def attachment_get(self, ctxt, attachment_id: str) -> dict:
        """Return an attachment. Raises AttachmentNotFound."""

    @abc.abstractmethod
    def attachment_update(self, ctxt, attachment_id: str,
                          connector: dict) -> dict:
        """Connect a host; returns the attachment with connection_info."""

    @abc.abstractmethod
    def attachment_complete(self, ctxt, attachment_id: str) -> None:
        """Mark the attachment attached (the guest uses it)."""

    @abc.abstractmethod
    def attachment_delete(self, ctxt, attachment_id: str) -> None:
        """Disconnect and forget the attachment."""

    def migrate_volume(self, ctxt, volume_id: str, pool: str,
                       max_bandwidth_mbps: int | None = None) -> dict:
        """Move the volume's data to ``pool``, attached or not.

        Returns the volume with ``migration_ids`` once every attachment
        has started. Backends that cannot move data refuse.
        """
        raise exception.MigrationNotSupported(backend=type(self).__name__)

    def migrate_volume_completion(self, ctxt, volume_id: str,
                                  new_volume_id: str, error: bool) -> None:
        """Tell the block-storage service that its own migration of an
        attached volume into ``new_volume_id`` ended (Cinder's
        ``os-migrate_volume_completion``). Only a service that migrates
        through the compute API's swap has one."""
        raise exception.MigrationNotSupported(backend=type(self).__name__)

    def mark_detached(self, ctxt, volume_id: str,
                      attachment_id: str) -> None:
        """Tell the block-storage service that ``attachment_id``, an
        attachment of the volume that it lost, attaches it no more: the
        volume's status then follows the attachments it still has
        (Cinder's ``os-detach``). Only a service whose migration
        completion can lose an attachment needs it."""
        raise exception.MigrationNotSupported(backend=type(self).__name__)

    def drain_pool(self, ctxt, pool: str, target_pool: str,
                   max_parallel: int = 1,
                   max_bandwidth_mbps: int | None = None,
                   dry_run: bool = False) -> dict:
        """Plan, and unless ``dry_run`` run, the move of every volume
        out of ``pool``; returns the drain with its progress."""
        raise exception.MigrationNotSupported(backend=type(self).__name__)

    def pool_drain_get(self, ctxt, pool: str) -> dict:
        """The pool's latest drain, with its progress."""
        raise exception.MigrationNotSupported(backend=type(self).__name__)

    def pool_drain_list(self, ctxt, pool: str, limit: int | None = None,
                        marker: str | None = None) -> list[dict]:
        """The pool's drains, newest first: a page of ``limit`` after the
        drain ``marker``."""
        raise exception.MigrationNotSupported(backend=type(self).__name__)

    def pool_drain_cancel(self, ctxt, pool: str) -> dict:
        """Begin no more volumes of the pool's running drain."""
        raise exception.MigrationNotSupported(backend=type(self).__name__)

"""Cinder's side of a Cinder move (``volmig.conductor.cinder_moves``):
the new volume's attachments and when Cinder has them attached, the
completion call, and the attachments Cinder loses when it completes.

Each call is safe to make again: a move resumed after a conductor's
restart finds what an earlier run made, in the move's record or in
Cinder.
"""

import time

from oslo_log import log as logging

from volmig import exception
from volmig.conductor import services
from volmig.conf import CONF
from volmig.db import cinder_moves as records
from volmig.db import instances as instances_db

LOG = logging.getLogger(__name__)

# Between looks at an attachment Cinder has not recorded attached yet.
ATTACHED_POLL_INTERVAL = 0.05


class CinderAttachments:

    def __init__(self, volume_api):
        self.volume_api = volume_api

    def dst_attachment_id(self, ctxt, move: dict, src_id: str) -> str:
        """The new volume's attachment for one server, made once. Its id
        only: whoever uses it next reads it from Cinder, and refuses one
        that is gone."""
        entry = move['attachments'][src_id]
        if entry.get('dst_attachment_id'):
            return entry['dst_attachment_id']
        attachment = self.volume_api.attachment_create(
            ctxt, move['new_volume_id'], entry['instance_uuid'],
            entry['attach_mode'])
        entries = dict(move['attachments'])
        entries[src_id] = dict(entry, dst_attachment_id=attachment['id'])
        move.update(records.update(ctxt, move['id'], move['status'],
                                   attachments=entries))
        return attachment['id']

    def connect(self, ctxt, move: dict, src_id: str, host: str) -> dict:
        """The connection info of the new volume's attachment for one
        server, connected to ``host`` once and recorded with the move.
        Not read back from Cinder: its GET of an attachment not
        connected yet gives the volume's format as a connection."""
        attachment_id = self.dst_attachment_id(ctxt, move, src_id)
        entry = move['attachments'][src_id]
        if entry.get('dst_connection_info'):
            return entry['dst_connection_info']
        info = self.volume_api.attachment_update(
            ctxt, attachment_id, services.connector(
                ctxt, host, entry['attach_mode']))['connection_info']
        entries = dict(move['attachments'])
        entries[src_id] = dict(entry, dst_connection_info=info)
        move.update(records.update(ctxt, move['id'], move['status'],
                                   attachments=entries))
        return info

    def wait_attached(self, ctxt, move: dict, src_id: str) -> None:
        """Until Cinder records the attachment attached, then the volume
        in use: it reserves the volume for no other attachment before."""
        attachment_id = move['attachments'][src_id]['dst_attachment_id']
        deadline = time.monotonic() + CONF.rpc_response_timeout
        while self.volume_api.attachment_get(ctxt, attachment_id)[
                'attach_status'] != 'attached' or self.volume_api.get_volume(
                    ctxt, move['new_volume_id'])['status'] == 'attaching':
            if time.monotonic() > deadline:
                raise exception.BlockStorageUnavailable(
                    action='record attachment %s as attached'
                    % attachment_id, reason='it is still not')
            time.sleep(ATTACHED_POLL_INTERVAL)

    def drop(self, ctxt, attachment_id: str) -> None:
        try:
            self.volume_api.attachment_delete(ctxt, attachment_id)
        except exception.AttachmentNotFound:
            pass  # Dropped by an earlier run of this step.

    def tell_cinder(self, ctxt, move: dict, error: bool) -> None:
        """The completion call, once: Cinder records having taken it as
        the old volume's migration status."""
        old = self.volume_api.get_volume(ctxt, move['old_volume_id'])
        if old.get('migration_status') != ('error' if error else 'success'):
            self.volume_api.migrate_volume_completion(
                ctxt, move['old_volume_id'], move['new_volume_id'], error)

    def keep(self, ctxt, move: dict) -> None:
        """Each server's attachment again, where Cinder lost it.

        Cinder's completion (29.0.0) casts the delete of the old data,
        which carries the new volume's id by then, before it moves the new
        attachments onto the volume's id; an attachment not moved yet when
        the delete lands is deleted with it. Cinder is settled once the
        call returned, and the guest still uses the same file.
        """
        for entry in move['attachments'].values():
            bdm = instances_db.bdm_get_by_volume(ctxt, entry['instance_uuid'],
                                                 move['old_volume_id'])
            try:
                attachment = self.volume_api.attachment_get(
                    ctxt, bdm['attachment_id'])
            except exception.AttachmentNotFound:
                attachment = None  # Made below: its warning has no traceback.
            if attachment is None:
                attachment = self._attach_again(ctxt, move, entry, bdm)
            # One made again by an earlier run may not be connected yet.
            if attachment['attach_status'] != 'attached':
                self._connect_again(ctxt, entry, bdm, attachment['id'])

    def _attach_again(self, ctxt, move: dict, entry: dict,
                      bdm: dict) -> dict:
        # Cinder still counts the lost attachment: a single-attach volume
        # stays in-use, and takes no new one, until told it is detached.
        self.volume_api.mark_detached(ctxt, move['old_volume_id'],
                                      bdm['attachment_id'])
        attachment = self.volume_api.attachment_create(
            ctxt, move['old_volume_id'], entry['instance_uuid'],
            entry['attach_mode'])
        # Recorded first: a resumed step finds it and goes on.
        instances_db.bdm_update(ctxt, bdm['id'],
                                {'attachment_id': attachment['id']})
        LOG.warning('Cinder lost the attachment of volume %(volume)s to '
                    'server %(server)s when it completed the migration; '
                    'attached it again as %(attachment)s',
                    {'volume': move['old_volume_id'],
                     'server': entry['instance_uuid'],
                     'attachment': attachment['id']})
        return attachment

    def _connect_again(self, ctxt, entry: dict, bdm: dict,
                       attachment_id: str) -> None:
        attachment = self.volume_api.attachment_update(
            ctxt, attachment_id, services.connector(
                ctxt, entry['host'], entry['attach_mode']))
        self.volume_api.attachment_complete(ctxt, attachment_id)
        instances_db.bdm_update(ctxt, bdm['id'], {'connection_info': dict(
            attachment['connection_info'],
            multiattach=(bdm['connection_info'] or {}).get(
                'multiattach'))})

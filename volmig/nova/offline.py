"""Moving a volume of stopped Nova servers: Cinder moves the data while
nothing runs, and Nova's records follow.

Nova refuses to swap a stopped server's volume, and Cinder moves an
attached volume only through that swap. So, for each server: hold it
(Nova's lock, so that its owner cannot start it), check that it is still
stopped, and let Cinder's attachment go (with volmig's service token, as
Nova's own detach does: Cinder refuses a user that deletes an attachment
Nova uses). Cinder then migrates a detached volume by itself, keeping its
id. Last, ``nova-manage volume_attachment refresh`` gives each server a
new attachment where the volume is now, and the server is let go. A
refresh runs whether the migration succeeded or not: it is what gives
the server its volume back.

Every step can be taken again, so a move cut off anywhere is finished by
taking its steps again with the same servers (which the volume no longer
names once its attachments are gone): the drain records them
(``volmig.conductor.cinder_drains``).
"""


from volmig import context as volmig_context
from volmig import exception
from volmig.nova import compute


class OfflineMove:
    """The steps, each of which may be taken again; Cinder's migration
    between ``let_go`` and ``refresh`` is the caller's to ask and follow."""

    def __init__(self, volumes, nova: compute.Nova):
        self.volumes = volumes
        self.nova = nova
        self.ctxt = volmig_context.get_service_context()

    def hold(self, server_ids, reason: str) -> None:
        """Lock each server with ``reason``; refuses, letting go what it
        held, if one of them is not stopped. A server locked for another
        reason stays locked, and is not volmig's to unlock."""
        try:
            for server_id in server_ids:
                if not self.nova.server(server_id).get('locked'):
                    self.nova.lock(server_id, reason)
                # Read again once held: it may have started meanwhile.
                server = self.nova.server(server_id)
                if server['status'] != compute.STOPPED:
                    raise exception.ServerNotStopped(
                        server_id=server_id, status=server['status'])
        except Exception:
            self.release(server_ids, reason)
            raise

    def release(self, server_ids, reason: str) -> None:
        """Unlock the servers that volmig locked with ``reason``."""
        for server_id in server_ids:
            if self.nova.server(server_id).get('locked_reason') == reason:
                self.nova.unlock(server_id)

    def let_go(self, volume_id: str, server_ids) -> None:
        """Delete the servers' Cinder attachments of the volume."""
        volume = self.volumes.get_volume(self.ctxt, volume_id)
        for attachment in volume['attachments']:
            if attachment['instance_uuid'] in server_ids:
                self.volumes.attachment_delete(self.ctxt, attachment['id'])

    def refresh(self, volume_id: str, server_ids) -> None:
        """Give each server a new attachment where the volume is now."""
        for server_id in server_ids:
            server = self.nova.server(server_id)
            connector = self.nova.connector(server['OS-EXT-SRV-ATTR:host'])
            self.nova.refresh(server_id, volume_id, connector)

"""A migration's dst attachment, as block storage made it: checked fit
for the migration, and connected for the guest's host."""

from volmig.conductor import rules
from volmig.conductor import services


def checked_dst(volume_api, ctxt, migration: dict,
                dst_attachment_id: str) -> dict:
    """dst's attachment, once it is found fit for the migration."""
    dst = volume_api.attachment_get(ctxt, dst_attachment_id)
    rules.check_dst_attachment(migration, dst)
    rules.check_dst_volume(migration, *(
        {'id': volume_id, 'size_mb': volume_api.volume_size_mb(ctxt,
                                                               volume_id)}
        for volume_id in (migration['volume_id'], dst['volume_id'])))
    return dst


def dst_to_send(volume_api, ctxt, dst_attachment_id: str, host: str,
                attach_mode: str) -> dict:
    """dst's attachment for a complete recorded before: connected now if
    it never was (its conductor died between recording the complete and
    connecting dst). One connected already is left as it is: a switch
    may have attached it."""
    dst = volume_api.attachment_get(ctxt, dst_attachment_id)
    if dst['connection_info']:
        return dst
    return connect_dst(volume_api, ctxt, dst, host, attach_mode)


def connect_dst(volume_api, ctxt, dst: dict, host: str,
                attach_mode: str) -> dict:
    """dst's attachment, connected for the guest's ``host`` unless block
    storage connected it already (``rules.dst_connected``)."""
    if rules.dst_connected(dst):
        return dst
    return volume_api.attachment_update(
        ctxt, dst['id'], services.connector(ctxt, host, attach_mode))

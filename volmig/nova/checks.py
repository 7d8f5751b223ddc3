"""Whether a server is on its volume where Cinder has it now.

Cinder records a migration through Nova's swap as done once Nova has
answered, and Nova answers from its own records. Three parties must
agree before a drain calls such a volume moved:

- Cinder: the server's attachment, and where it connects the volume;
- Nova: the record its next start or hard reboot connects
  (``nova-manage volume_attachment show``), which must name the same
  place;
- the guest: the file libvirt runs as the disk whose serial is the
  volume's id, read on the server's compute host by volmig's agent there,
  which must be the file Nova's record connected.

A compute host with no volmig agent up is not checked, and the drain says
so: the first two still are.
"""

import oslo_messaging as messaging

from volmig import exception
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import services
from volmig.db import services as service_db


def _mismatch(volume_id: str, server_id: str, reason: str):
    return exception.SwapNotVerified(volume_id=volume_id,
                                     server_id=server_id, reason=reason)


def swapped(ctxt, volumes, nova, compute_api, volume: dict,
            server_id: str) -> str:
    """What was checked, in words; raises ``SwapNotVerified`` naming what
    differs."""
    volume_id = volume['id']
    attachment = next((a for a in volume['attachments']
                       if a['instance_uuid'] == server_id), None)
    if attachment is None:
        raise _mismatch(volume_id, server_id, 'Cinder has no attachment '
                        'of the server any more')
    cinder = (volumes.attachment_get(ctxt, attachment['id'])
              .get('connection_info') or {}).get('data') or {}
    record = nova.record(server_id, volume_id).get('data') or {}
    # Every key both name (an NFS export and file, an iSCSI target and
    # LUN...); Nova adds its own, such as where it connected the volume.
    common = sorted(set(cinder) & set(record))
    differ = [key for key in common if cinder[key] != record[key]]
    if differ or not common:
        raise _mismatch(volume_id, server_id, "Nova's record differs from "
                        "Cinder's attachment %s in %s" % (
                            attachment['id'],
                            ', '.join(differ) or 'everything'))
    host = nova.server(server_id).get('OS-EXT-SRV-ATTR:host')
    try:
        agent = service_db.get(ctxt, compute_rpcapi.BINARY, host)
    except exception.ServiceNotFound:
        agent = None
    if agent is None or not services.service_is_up(agent):
        return ("Nova's record agrees with Cinder; the live disk was not "
                'checked: no volmig agent is up on host %s' % host)
    try:
        live = compute_api.nova_disk(ctxt, host, server_id, volume_id)
    except (exception.DriverError, exception.ComputeTooOld,
            messaging.MessagingTimeout) as exc:
        return ("Nova's record agrees with Cinder; the live disk was not "
                'checked on host %s: %s' % (host,
                                            exception.safe_message(exc)))
    expected = record.get('device_path')
    if live is None or live != expected:
        raise _mismatch(volume_id, server_id, 'its live disk on host %s is '
                        "%s, Nova's record connected %s" % (
                            host, live or 'none', expected))
    return ("Nova's record agrees with Cinder, and the live disk on host "
            '%s is %s' % (host, live))

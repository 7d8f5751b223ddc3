"""How a drain of a Cinder pool checks each move before it calls it done:
neither Cinder nor Nova checks its own.

After Nova's swap (``swapped``). Cinder records the migration as done
once Nova has answered, and Nova answers from its own records. Three
parties must agree:

- Cinder: the server's attachment, and where it connects the volume;
- Nova: the record its next start or hard reboot connects
  (``nova-manage volume_attachment show``), which must name the same
  place;
- the guest: the file libvirt runs as the disk whose serial is the
  volume's id, read on the server's compute host by volmig's agent there,
  which must be the file Nova's record connected.

A compute host with no volmig agent up is not checked, and the drain says
so: the first two still are.

After Cinder's copy (``Checksums``), of a detached volume or of an
offline move's: a volmig agent hashes the volume from the disk before
Cinder moves it and again after, each time through an attachment of the
agent's host that the drain records (so that a restarted conductor finds
and deletes it). The attachment is read-only and names no server, and it
is deleted before Cinder's migration begins, which needs the volume
detached.
"""

import oslo_messaging as messaging

from volmig import exception
from volmig.compute import copies
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import services
from volmig.db import services as service_db

BEFORE, AFTER = 'hashing', 'checking'


class Checksums:
    """An entry of the drain hashes its volume at step ``hashing``
    (before Cinder's migration) and ``checking`` (after); its ``job``
    names the agent's host and the attachment there, and its
    ``checksum`` is the one taken before."""

    def __init__(self, volumes, compute_api):
        self.volumes = volumes
        self.compute_api = compute_api

    def start(self, ctxt, drain_id: str, entry: dict, step: str,
              save) -> bool:
        """Begin the entry's hash at ``step``; False, saying so in the
        entry's ``check``, if no agent is up to take it."""
        host = self.agent(ctxt)
        why = ('no volmig agent is up to hash the volume' if host is None
               else None if self.compute_api.can_send_version(
                   compute_rpcapi.CHECK_VERSION)
               else 'the agents are older than RPC %s'
               % compute_rpcapi.CHECK_VERSION)
        if why:
            entry['check'] = "not checked %s Cinder's copy: %s" % (
                'before' if step == BEFORE else 'after', why)
            return False
        entry['job'] = {'id': '%s-%s-%s' % (drain_id, entry['volume_id'],
                                            step),
                        'volume_id': entry['volume_id'], 'host': host}
        try:
            self.begin(ctxt, entry['job'], save)
        except Exception:
            self.end(ctxt, entry['job'])
            raise
        entry['step'] = step
        return True

    def finish(self, ctxt, entry: dict) -> str | None:
        """The entry's hash once its agent has it, its attachment
        deleted; None while it works."""
        try:
            checksum = self.result(ctxt, entry['job'])
        except Exception:
            self.end(ctxt, entry['job'])
            raise
        if checksum is not None:
            self.end(ctxt, entry['job'])
        return checksum

    @staticmethod
    def agent(ctxt) -> str | None:
        """The host of an agent that is up, the same one each time while
        it stays up; None if there is none."""
        hosts = sorted(s['host'] for s in services.get_all(
            ctxt, compute_rpcapi.BINARY) if s['is_up'] and not s.get(
                'disabled'))
        return hosts[0] if hosts else None

    def begin(self, ctxt, job: dict, save) -> None:
        """Hash the volume of ``job`` (``volume_id``, ``host``, ``id``) on
        its host: attach it there, ``save`` what was attached, then ask the
        agent."""
        attachment = self.volumes.attachment_create(
            ctxt, job['volume_id'], None, mode='ro')
        job['attachment_id'] = attachment['id']
        save()
        self._ask(ctxt, job)

    def _ask(self, ctxt, job: dict) -> None:
        attachment = self.volumes.attachment_update(
            ctxt, job['attachment_id'],
            services.connector(ctxt, job['host'], 'ro'))
        self.compute_api.volume_checksum(ctxt, job['host'], job['id'],
                                         attachment['connection_info'])

    def result(self, ctxt, job: dict) -> str | None:
        """The checksum once the agent has it; None while it works (or
        does not answer). Raises what the agent failed with. An agent
        that is down has its hash taken by another that is up (on the
        same attachment, connected there), or it would be waited for as
        long as its host stays gone."""
        if not self._up(ctxt, job['host']):
            host = self.agent(ctxt)
            if host is not None:
                job['host'] = host
                self._ask(ctxt, job)
            return None
        try:
            status = self.compute_api.volume_copy_status(ctxt, job['host'],
                                                         job['id'])
        except messaging.MessagingTimeout:
            return None
        if status['state'] == copies.UNKNOWN:
            # The agent restarted and forgot it: nothing writes to the
            # volume, so the hash is taken again.
            self._ask(ctxt, job)
            return None
        if status['state'] == copies.FAILED:
            raise exception.DriverError(
                action='hash volume %s on host %s' % (job['volume_id'],
                                                     job['host']),
                reason=status.get('error'))
        return status.get('checksum') if status['state'] == copies.DONE \
            else None

    @staticmethod
    def _up(ctxt, host: str) -> bool:
        try:
            return services.service_is_up(service_db.get(
                ctxt, compute_rpcapi.BINARY, host))
        except exception.ServiceNotFound:
            return False

    def end(self, ctxt, job: dict) -> None:
        """Delete the job's attachment, if it has one still."""
        if job.get('attachment_id'):
            try:
                self.volumes.attachment_delete(ctxt, job['attachment_id'])
            except exception.AttachmentNotFound:
                pass
            job['attachment_id'] = None


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

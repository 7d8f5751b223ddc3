"""A detached volume's bytes, hashed before and after Cinder moves it.

Cinder's own migration of a detached volume copies it and checks
nothing. A drain has a volmig agent hash the volume from the disk before
Cinder moves it and again after, both through an attachment of the
agent's host that the drain records (so that a restarted conductor finds
and deletes it), and calls the move done only when the two match.

The attachment is read-only and names no server: while it exists the
volume is Cinder's ``reserved``/``in-use`` and nobody else's migration or
attachment can take it unnoticed; it is deleted before Cinder's
migration begins, which needs the volume detached.
"""

import oslo_messaging as messaging

from volmig import exception
from volmig.compute import copies
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import services

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
        if host is None:
            entry['check'] = ('not checked %s Cinder\'s copy: no volmig '
                              'agent is up to hash the volume'
                              % ('before' if step == BEFORE else 'after'))
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
        does not answer). Raises what the agent failed with."""
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

    def end(self, ctxt, job: dict) -> None:
        """Delete the job's attachment, if it has one still."""
        if job.get('attachment_id'):
            try:
                self.volumes.attachment_delete(ctxt, job['attachment_id'])
            except exception.AttachmentNotFound:
                pass
            job['attachment_id'] = None

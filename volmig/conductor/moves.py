"""Cinder's migration of an attached volume, carried out live by volmig.

An unmodified Cinder moves an attached volume by making a new one, asking
the compute API to swap each attachment to it (``PUT /servers/{id}/
os-volume_attachments/{old}``, one request per attachment, all before
any completion), and waiting for ``os-migrate_volume_completion``. It
copies nothing. volmig answers those requests with its live path instead
of a hypervisor copy, as one move per old and new volume:

- ``requested``: the swap requests are recorded, until one has come for
  every attachment Cinder has of the old volume;
- ``starting``: ``start`` for each attachment, through the block-storage
  client, the same routine every caller's start runs; the rules refuse
  a multiattach volume with a read/write attachment among several;
- ``copying``: the agent on the first attachment's host copies the
  frozen old volume into the new one, verified from the disk;
- ``completing``: ``complete`` for each attachment, one after another (a
  multiattach volume takes a new attachment only once it is in use);
- ``releasing``: the old attachments are deleted, as Nova deletes them;
- ``notifying``: one completion call; Cinder then gives the old volume's
  id to the new data and deletes the old.

Before ``completing`` any failure cancels what started, drops the new
attachments, and tells Cinder ``error: true`` (``failing``): the guests
stay on the old volume and Cinder deletes the new one. From
``completing`` on, the guests may be on the new volume, so a failure is
retried, never rolled back. Each step is recorded before it is taken and
is safe to run again, so a restarted conductor resumes a move from its
record, and a completion call that was lost is sent again.
"""

import threading
import time

from futurist import ThreadPoolExecutor
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from volmig import client as client_mod
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.conductor import services
from volmig.conf import CONF
from volmig.db import api as db
from volmig.db import moves as records
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)

REQUESTED, STARTING, COPYING = (states.MOVE_REQUESTED, states.MOVE_STARTING,
                                states.MOVE_COPYING)
COMPLETING, RELEASING, NOTIFYING = (states.MOVE_COMPLETING,
                                    states.MOVE_RELEASING,
                                    states.MOVE_NOTIFYING)
FAILING, DONE, FAILED = (states.MOVE_FAILING, states.MOVE_DONE,
                         states.MOVE_FAILED)
ACTIVE = (REQUESTED, STARTING, COPYING, COMPLETING, RELEASING, NOTIFYING,
          FAILING)
# A status call every this many seconds while the agent copies: a few
# calls a second for one move, and little time lost after its end.
COPY_POLL_INTERVAL = 0.2
# Between looks at a switch under way (a fraction of a second).
SWITCH_POLL_INTERVAL = 0.05
# Cinder has asked for every attachment within a second in every run
# measured; a request that never comes fails the move after this.
REQUEST_WAIT = 120
FOREVER = 10 ** 9


def cinder_initiated(old_volume: dict, new_volume: dict) -> bool:
    """Whether Cinder made ``new_volume`` to migrate ``old_volume`` into."""
    return (new_volume.get('migration_status')
            == 'target:%s' % old_volume['id'])


class MoveConductor:

    def __init__(self, volume_api, compute_api, host: str):
        self.volume_api = volume_api
        self.compute_api = compute_api
        self.host = host
        self._client: client_mod.MigrationClient | None = None
        self._executor = ThreadPoolExecutor(max_workers=4)
        self._lock = threading.Lock()
        self._running: set[str] = set()

    @property
    def client(self) -> client_mod.MigrationClient:
        # volmig-api's RPC face: each action's sequence is written there
        # once, whoever the caller is.
        if self._client is None:
            self._client = client_mod.MigrationClient(
                poll_interval=SWITCH_POLL_INTERVAL)
        return self._client

    # The swap requests.

    def request(self, ctxt, instance: dict, old_bdm: dict,
                old_volume: dict, new_volume: dict) -> dict:
        """Record one of Cinder's swap requests; run the move once every
        attachment has asked."""
        move = records.add_request(
            ctxt, old_volume['id'], new_volume['id'],
            old_bdm['attachment_id'],
            {'instance_uuid': instance['uuid'], 'host': instance['host'],
             'attach_mode': old_bdm['attach_mode']}, REQUESTED)
        LOG.info('Cinder migrates volume %(old)s to %(new)s: swap request '
                 '%(count)d of %(total)d (server %(server)s)',
                 {'old': old_volume['id'], 'new': new_volume['id'],
                  'count': len(move['attachments']),
                  'total': len(old_volume['attachments']),
                  'server': instance['uuid']})
        if self._all_asked(move, old_volume):
            self._submit(move['id'])
        return move

    @staticmethod
    def _all_asked(move: dict, old_volume: dict) -> bool:
        """Whether Cinder asked for every attachment it has of the old
        volume. None seen is a view that misses some (another project's,
        say), never a volume with nothing to wait for."""
        attached = {a['id'] for a in old_volume['attachments']}
        return bool(attached) and attached <= set(move['attachments'])

    def resume(self) -> None:
        """Periodic: run every move this conductor owns, or whose owner is
        gone, and give up on requests that never completed a group."""
        ctxt = volmig_context.get_admin_context()
        for move in records.get_all(ctxt, ACTIVE):
            if move['status'] == REQUESTED:
                old = self.volume_api.get_volume(ctxt, move['old_volume_id'])
                if self._all_asked(move, old):
                    self._submit(move['id'])
                elif timeutils.delta_seconds(
                        move['created_at'], timeutils.utcnow()) > REQUEST_WAIT:
                    self._fail(ctxt, move, 'Cinder asked to swap %d of '
                               'the volume\'s %d attachments' % (
                                   len(move['attachments']),
                                   len(old['attachments'])))
            elif move['owner'] == self.host or not self._owner_up(ctxt,
                                                                  move):
                self._submit(move['id'])

    @staticmethod
    def _owner_up(ctxt, move: dict) -> bool:
        try:
            return services.service_is_up(service_db.get(
                ctxt, 'volmig-conductor', move['owner']))
        except exception.ServiceNotFound:
            return False

    def _submit(self, move_id: str) -> None:
        with self._lock:
            if move_id in self._running:
                return
            self._running.add(move_id)
        self._executor.submit(self._run, move_id)

    # The steps.

    def _run(self, move_id: str) -> None:
        ctxt = volmig_context.get_service_context()
        try:
            move = records.get(ctxt, move_id)
            while move['status'] not in (DONE, FAILED):
                step = getattr(self, '_' + move['status'])
                began = time.monotonic()
                try:
                    move = step(ctxt, move)
                    LOG.info('Volume move %(id)s: step %(step)s took '
                             '%(seconds).2f s', {
                                 'id': move_id, 'step': step.__name__[1:],
                                 'seconds': time.monotonic() - began})
                except Exception as exc:
                    if move['status'] not in (REQUESTED, STARTING, COPYING):
                        raise
                    LOG.warning('Cinder\'s migration of volume %(old)s '
                                'fails at %(step)s: %(reason)s',
                                {'old': move['old_volume_id'],
                                 'step': move['status'],
                                 'reason': exception.safe_message(exc)})
                    move = self._fail(ctxt, move,
                                      exception.safe_message(exc))
        except Exception:
            # Left at its step: the next resume takes it up again.
            LOG.exception('Volume move %s stopped; it is resumed later',
                          move_id)
        finally:
            with self._lock:
                self._running.discard(move_id)

    def _fail(self, ctxt, move: dict, reason: str) -> dict:
        return records.update(ctxt, move['id'], move['status'],
                              status=FAILING, error=reason)

    def _requested(self, ctxt, move: dict) -> dict:
        return records.update(ctxt, move['id'], REQUESTED, status=STARTING,
                              owner=self.host)

    def _starting(self, ctxt, move: dict) -> dict:
        entries = dict(move['attachments'])
        for src_id in sorted(entries):
            migration = self.client.start(ctxt, src_id, wait=False)
            entries[src_id] = dict(entries[src_id],
                                   migration_id=migration['id'])
            # Recorded at once: a failure cancels what started.
            move = records.update(ctxt, move['id'], STARTING,
                                  attachments=entries)
        for entry in entries.values():
            self.client.wait_for(ctxt, entry['migration_id'],
                                 states.STARTED, timeout=FOREVER)
        first = entries[sorted(entries)[0]]
        return records.update(ctxt, move['id'], STARTING, status=COPYING,
                              copy_host=first['host'])

    def _dst_attachment_id(self, ctxt, move: dict, src_id: str) -> str:
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

    def _copying(self, ctxt, move: dict) -> dict:
        src_id = sorted(move['attachments'])[0]
        entry = move['attachments'][src_id]
        dst = self.volume_api.attachment_update(
            ctxt, self._dst_attachment_id(ctxt, move, src_id),
            services.connector(ctxt, move['copy_host'], entry['attach_mode']))
        src_info = db.bdm_get_by_attachment(ctxt, src_id)['connection_info']
        host = move['copy_host']
        while True:
            try:
                copy = self.compute_api.volume_copy_status(ctxt, host,
                                                           move['id'])
            except messaging.MessagingTimeout:
                # The agent is down: the copy is done again once it is
                # back. An operator who gives up aborts the migration.
                if self.client.get(ctxt, entry['migration_id'])[
                        'status'] in states.TERMINAL:
                    raise exception.MigrationFailed(
                        migration_id=entry['migration_id'],
                        reason='it ended while the agent on %s was down'
                        % host)
                continue
            if copy['state'] == 'done':
                break
            if copy['state'] == 'failed':
                raise exception.MigrationFailed(
                    migration_id=entry['migration_id'],
                    reason='the copy into volume %s failed: %s' % (
                        move['new_volume_id'], copy['error']))
            if copy['state'] == 'unknown':
                # Never sent, or the agent restarted since.
                self.compute_api.volume_copy(ctxt, host, move['id'],
                                             src_info,
                                             dst['connection_info'])
            time.sleep(COPY_POLL_INTERVAL)
        return records.update(ctxt, move['id'], COPYING, status=COMPLETING,
                              checksum=copy['checksum'])

    def _completing(self, ctxt, move: dict) -> dict:
        for src_id in sorted(move['attachments']):
            migration = self.client.get(
                ctxt, move['attachments'][src_id]['migration_id'])
            if migration['status'] == states.STARTED:
                self.client.complete(
                    ctxt, src_id, self._dst_attachment_id(ctxt, move,
                                                          src_id),
                    wait=False)
            self.client.wait_for(ctxt, migration['id'],
                                 client_mod.SRC_RELEASED_OR_LATER,
                                 timeout=FOREVER)
            # Cinder takes another attachment of a multiattach volume
            # only once it is in use.
            self._wait_attached(ctxt, move, src_id)
        return records.update(ctxt, move['id'], COMPLETING,
                              status=RELEASING)

    def _wait_attached(self, ctxt, move: dict, src_id: str) -> None:
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
            time.sleep(SWITCH_POLL_INTERVAL)

    def _drop_attachment(self, ctxt, attachment_id: str) -> None:
        try:
            self.volume_api.attachment_delete(ctxt, attachment_id)
        except exception.AttachmentNotFound:
            pass  # Dropped by an earlier run of this step.

    def _tell_cinder(self, ctxt, move: dict, error: bool) -> None:
        """The completion call, once: Cinder records having taken it as
        the old volume's migration status."""
        old = self.volume_api.get_volume(ctxt, move['old_volume_id'])
        if old.get('migration_status') != ('error' if error else 'success'):
            self.volume_api.migrate_volume_completion(
                ctxt, move['old_volume_id'], move['new_volume_id'], error)

    def _releasing(self, ctxt, move: dict) -> dict:
        for src_id in sorted(move['attachments']):
            self._drop_attachment(ctxt, src_id)
        return records.update(ctxt, move['id'], RELEASING, status=NOTIFYING)

    def _notifying(self, ctxt, move: dict) -> dict:
        self._tell_cinder(ctxt, move, error=False)
        self._keep_attachments(ctxt, move)
        LOG.info('Cinder\'s migration of volume %(old)s is complete: every '
                 'guest is on its new data (sha256 %(sum)s)',
                 {'old': move['old_volume_id'], 'sum': move['checksum']})
        return records.update(ctxt, move['id'], NOTIFYING, status=DONE)

    def _keep_attachments(self, ctxt, move: dict) -> None:
        """Each server's attachment again, where Cinder lost it.

        Cinder's completion (29.0.0) casts the delete of the old data,
        which carries the new volume's id by then, before it moves the new
        attachments onto the volume's id; an attachment not moved yet when
        the delete lands is deleted with it. Cinder is settled once the
        call returned, and the guest still uses the same file.
        """
        for entry in move['attachments'].values():
            bdm = db.bdm_get_by_volume(ctxt, entry['instance_uuid'],
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
        db.bdm_update(ctxt, bdm['id'], {'attachment_id': attachment['id']})
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
        db.bdm_update(ctxt, bdm['id'], {'connection_info': dict(
            attachment['connection_info'],
            multiattach=(bdm['connection_info'] or {}).get(
                'multiattach'))})

    def _failing(self, ctxt, move: dict) -> dict:
        """The guests go back to the old volume; Cinder drops the new."""
        for src_id, entry in sorted(move['attachments'].items()):
            if entry.get('migration_id'):
                migration = self.client.get(ctxt, entry['migration_id'])
                if migration['status'] not in states.TERMINAL:
                    self.client.cancel(ctxt, src_id)
                    self.client.wait_for(ctxt, migration['id'],
                                         states.CANCELLED, timeout=FOREVER)
            if entry.get('dst_attachment_id'):
                self._drop_attachment(ctxt, entry['dst_attachment_id'])
        self._tell_cinder(ctxt, move, error=True)
        LOG.warning('Cinder\'s migration of volume %(old)s failed; every '
                    'guest stays on it: %(reason)s',
                    {'old': move['old_volume_id'], 'reason': move['error']})
        return records.update(ctxt, move['id'], FAILING, status=FAILED)

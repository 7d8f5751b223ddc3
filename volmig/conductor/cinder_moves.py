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
  a multiattach volume with a read/write attachment among several.
  Meanwhile the new volume is connected to the first attachment's host;
- ``copying``: the agent on that host copies the frozen old volume into
  the new one, verified from the disk;
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
from volmig.conductor import cinder_attachments
from volmig.conductor import services
from volmig.db import cinder_moves as records
from volmig.db import instances as instances_db
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


def next_look(copy: dict, first: tuple[float, int], now: float) -> float:
    """Seconds until the next look at a copy: ``COPY_POLL_INTERVAL``, or
    less when the copy's pace since ``first`` (a time, and the bytes done
    then) says it ends sooner. A look on a fixed beat came 0.13-0.2 s
    after a copy of a few seconds had ended."""
    began, done_then = first
    done, total = copy.get('done', 0), copy.get('total', 0)
    if done <= done_then or now <= began:
        return COPY_POLL_INTERVAL
    left = (total - done) / ((done - done_then) / (now - began))
    return min(COPY_POLL_INTERVAL, max(SWITCH_POLL_INTERVAL, left))


def _copier(attachments: dict) -> str:
    """The old attachment whose host copies: the same one whichever
    step asks, before and after a restart."""
    return sorted(attachments)[0]


class CinderMoves:

    def __init__(self, volume_api, compute_api, host: str):
        self.volume_api = volume_api
        self.compute_api = compute_api
        self.host = host
        self._client: client_mod.MigrationClient | None = None
        self._executor = ThreadPoolExecutor(max_workers=4)
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self.attachments = cinder_attachments.CinderAttachments(volume_api)

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
        # The copy's end of the new volume is connected while the agents
        # start: Cinder's connection took a quarter of a second, and it
        # was on the copy's path.
        copier = _copier(entries)
        host = entries[copier]['host']
        self.attachments.connect(ctxt, move, copier, host)
        for entry in move['attachments'].values():
            self.client.wait_for(ctxt, entry['migration_id'],
                                 states.STARTED, timeout=FOREVER)
        return records.update(ctxt, move['id'], STARTING, status=COPYING,
                              copy_host=host)

    def _copying(self, ctxt, move: dict) -> dict:
        src_id = _copier(move['attachments'])
        entry = move['attachments'][src_id]
        host = move['copy_host']
        dst_info = self.attachments.connect(ctxt, move, src_id, host)
        src_info = instances_db.bdm_get_by_attachment(
            ctxt, src_id)['connection_info']
        first = None
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
                                             src_info, dst_info)
            now = time.monotonic()
            first = first or (now, copy.get('done', 0))
            time.sleep(next_look(copy, first, now))
        return records.update(ctxt, move['id'], COPYING, status=COMPLETING,
                              checksum=copy['checksum'])

    def _completing(self, ctxt, move: dict) -> dict:
        for src_id in sorted(move['attachments']):
            migration = self.client.get(
                ctxt, move['attachments'][src_id]['migration_id'])
            if migration['status'] == states.STARTED:
                dst_id = self.attachments.dst_attachment_id(ctxt, move,
                                                            src_id)
                self.client.complete(ctxt, src_id, dst_id, wait=False)
            self.client.wait_for(ctxt, migration['id'],
                                 client_mod.SRC_RELEASED_OR_LATER,
                                 timeout=FOREVER)
            # Cinder takes another attachment of a multiattach volume
            # only once it is in use.
            self.attachments.wait_attached(ctxt, move, src_id)
        return records.update(ctxt, move['id'], COMPLETING,
                              status=RELEASING)

    def _releasing(self, ctxt, move: dict) -> dict:
        for src_id in sorted(move['attachments']):
            self.attachments.drop(ctxt, src_id)
        return records.update(ctxt, move['id'], RELEASING, status=NOTIFYING)

    def _notifying(self, ctxt, move: dict) -> dict:
        self.attachments.tell_cinder(ctxt, move, error=False)
        self.attachments.keep(ctxt, move)
        LOG.info('Cinder\'s migration of volume %(old)s is complete: every '
                 'guest is on its new data (sha256 %(sum)s)',
                 {'old': move['old_volume_id'], 'sum': move['checksum']})
        return records.update(ctxt, move['id'], NOTIFYING, status=DONE)

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
                self.attachments.drop(ctxt, entry['dst_attachment_id'])
        self.attachments.tell_cinder(ctxt, move, error=True)
        LOG.warning('Cinder\'s migration of volume %(old)s failed; every '
                    'guest stays on it: %(reason)s',
                    {'old': move['old_volume_id'], 'reason': move['error']})
        return records.update(ctxt, move['id'], FAILING, status=FAILED)

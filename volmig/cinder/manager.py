"""cinder-volume's manager, with volmig's live migration of attached
volumes.

cinder.conf::

    [DEFAULT]
    volume_manager = volmig.cinder.manager.VolumeManager
    [volmig]
    transport_url = rabbit://cinder-volmig:SECRET@volmig-rabbit:5672/

Cinder migrates a detached volume by itself: it creates the new volume on
the destination backend, copies (``_copy_volume_data``) and completes. An
attached one it hands to the compute service, one swap per attachment.
This manager runs Cinder's detached sequence for an attached volume too,
with volmig around the copy:

1. volmig starts each attachment: from then on nothing writes to the old
   volume. volmig's rules decide what may start (two read/write
   attachments of a multiattach volume may not): a refusal comes before
   any guest is touched or any volume made;
2. Cinder creates the new volume, while the guests write to overlays;
3. Cinder copies between the backends, so any pair of Cinder drivers
   works. If making the new volume or the copy fails, volmig cancels each
   start: the guests stay on the old volume, and Cinder deletes the new
   one;
4. volmig completes each attachment onto an attachment of the new volume;
5. the old attachments are deleted, and Cinder's completion gives the new
   data the volume's id and deletes the old data.

From step 4 a guest may be on the new volume: Cinder keeps it whatever
fails next, and the error names the migrations an operator recovers.

Tested with Cinder 29.0.0. It relies on ``_migrate_volume_generic``
calling ``_copy_volume_data``, then ``migrate_volume_completion``, for a
volume without attachments, and on ``delete_volume`` taking Cinder's
``<volume id>-delete_volume`` lock.
"""

import contextlib
import threading
import time

from cinder import context
from cinder import coordination
from cinder import exception as cinder_exception
from cinder import objects
from cinder.objects import fields
from cinder.volume import api as cinder_api
from cinder.volume import manager
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import excutils
from oslo_utils import timeutils

from volmig import client
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.cinder import opts

CONF = cfg.CONF
opts.register_opts(CONF)
LOG = logging.getLogger(__name__)
# Seconds between looks at a switch under way (a guest waits on its
# overlay meanwhile): a database read and one small call.
POLL_INTERVAL = 0.05


class StartRefused(cinder_exception.VolumeMigrationFailed):
    """volmig started no attachment; nothing was made or changed. One line
    of cinder-volume's log says why: a traceback would say nothing more."""


class VolumeManager(manager.VolumeManager):

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The attached volumes this process is migrating, by id.
        self._moves: dict[str, Move] = {}
        self._client: client.MigrationClient | None = None

    def _volmig(self) -> client.MigrationClient:
        # Made on first use: cinder-volume forks a process per backend
        # after it makes their managers, and a transport's connections do
        # not survive a fork.
        if self._client is None:
            self._client = client.MigrationClient(
                conf=CONF, url=CONF.volmig.transport_url)
        return self._client

    def init_host(self, *args, **kwargs):
        super().init_host(*args, **kwargs)
        # Off the start-up path: volmig may not answer yet, and Cinder
        # must serve meanwhile.
        threading.Thread(target=self._settle_interrupted, daemon=True,
                         name='volmig-settle').start()

    def _settle_interrupted(self) -> None:
        """The attached volumes this backend was migrating when its
        process stopped: their sequence lived in that process.

        Before the completion, every guest goes back to the old volume,
        the new one is deleted, and the migration ends in error, as a
        failed copy ends. From the completion on a guest may be on the
        new volume, so both are kept and the error names the migrations
        an operator recovers.
        """
        ctxt = context.get_admin_context()
        for volume in objects.VolumeList.get_all_by_host(ctxt, self.host):
            if not (volume.volume_attachment and volume.migration_status
                    in ('migrating', 'completing')):
                continue
            try:
                Move(self._volmig(), self, ctxt, volume).settle(volume)
            except Exception:
                LOG.exception('Could not settle the interrupted migration '
                              'of volume %s', volume.id)

    @messaging.expected_exceptions(StartRefused)
    def migrate_volume(self, *args, **kwargs):
        return super().migrate_volume(*args, **kwargs)

    @messaging.expected_exceptions(StartRefused)
    def retype(self, context, volume, new_type_id, host,
               migration_policy='never', reservations=None,
               old_reservations=None):
        # cinder-api reserved the quota in the volume's project, and
        # Cinder 29 rolls a failed retype back in the caller's (its
        # commit names the project, its rollback does not): an admin's
        # retype of another project's volume that fails would leave the
        # reservations. In the volume's project, the rollback finds them.
        if context.project_id != volume.project_id:
            context = context.elevated()
            context.project_id = volume.project_id
        return super().retype(context, volume, new_type_id, host,
                              migration_policy, reservations,
                              old_reservations)

    def _migrate_volume_generic(self, ctxt, volume, backend,
                                new_type_id) -> None:
        if not volume.volume_attachment:
            return super()._migrate_volume_generic(ctxt, volume, backend,
                                                   new_type_id)
        move = self._moves[volume.id] = Move(self._volmig(), self, ctxt,
                                             volume)
        try:
            # Before Cinder makes the new volume: a refusal comes before
            # anything is made, and a failure to make it cancels the start.
            with move.step('start'):
                try:
                    move.start()
                except StartRefused as exc:
                    LOG.warning('Attached volume %(id)s was not migrated: '
                                '%(reason)s', {'id': volume.id,
                                               'reason': exc.msg})
                    raise
            try:
                # Cinder's own sequence for a detached volume; the two
                # methods below put volmig around its copy.
                super()._migrate_volume_generic(ctxt, _detached_view(volume),
                                                backend, new_type_id)
            except Exception:
                with excutils.save_and_reraise_exception():
                    # From the completion on, a guest may be on the new
                    # volume: the completion takes back only the others.
                    if not move.completing:
                        move.cancel()
        finally:
            del self._moves[volume.id]

    def _copy_volume_data(self, ctxt, src_vol, dest_vol,
                          remote=None) -> None:
        move = self._moves.get(src_vol.id)
        if move is None:
            return super()._copy_volume_data(ctxt, src_vol, dest_vol,
                                             remote)
        # The first guest's new attachment is connected while Cinder
        # copies, so that the complete only switches.
        preparing = threading.Thread(target=move.prepare, args=(dest_vol,))
        preparing.start()
        try:
            with move.step('copy'):
                super()._copy_volume_data(ctxt, src_vol, dest_vol, remote)
        finally:
            preparing.join()
        LOG.info('Volume %(src)s copied to %(dst)s while its guests wrote '
                 'to their overlays', {'src': src_vol.id,
                                       'dst': dest_vol.id})

    def migrate_volume_completion(self, ctxt, volume, new_volume,
                                  error=False):
        move = self._moves.get(volume.id)
        if move is None or error:
            return super().migrate_volume_completion(ctxt, volume,
                                                     new_volume, error)
        # A guest may be on the new volume from here on: Cinder's cleanup
        # deletes it only while the volume is still 'migrating'.
        volume.migration_status = 'completing'
        volume.save()
        move.completing = True
        with move.step('complete'):
            move.complete(volume, new_volume)
        # The completion casts the delete of the old data, which carries
        # the new volume's id by then, before it moves the new attachments
        # onto the volume's id: a delete that came first would delete them
        # with it. The delete takes this lock first.
        with coordination.COORDINATOR.get_lock(
                '%s-delete_volume' % new_volume.id), move.step('cinder'):
            return super().migrate_volume_completion(ctxt, volume,
                                                     new_volume)


def _detached_view(volume):
    """The volume as Cinder's generic migration sees a detached one; the
    attachments stay in the database, only this copy hides them."""
    view = volume.obj_clone()
    view.volume_attachment = objects.VolumeAttachmentList(
        context=volume._context, objects=[])
    view.volume_attachment.obj_reset_changes()
    view.obj_reset_changes(['volume_attachment'])
    return view


class Move:
    """One attached volume's migration: volmig's, per attachment."""

    def __init__(self, volmig: client.MigrationClient,
                 volume_manager: VolumeManager, ctxt, volume):
        self.volmig = volmig
        self.manager = volume_manager
        self.ctxt = ctxt.elevated()
        # volmig's migration client is for services.
        self.service = volmig_context.RequestContext(
            user_id=ctxt.user_id, project_id=ctxt.project_id,
            roles=['service'], request_id=ctxt.request_id, overwrite=False)
        self.volume_id = volume.id
        self.modes = {attachment.id: attachment.attach_mode or 'rw'
                      for attachment in volume.volume_attachment}
        self.migrations: list[dict] = []
        # {source attachment id: its new attachment, made during the copy}
        self.prepared: dict = {}
        self.completing = False

    @contextlib.contextmanager
    def step(self, name: str):
        """Log how long a step of the move took, for operators and
        ``benchmarks/cinder_migration.py``."""
        watch = timeutils.StopWatch().start()
        yield
        LOG.info('Attached volume %(id)s: step %(step)s took %(took).2f s',
                 {'id': self.volume_id, 'step': name,
                  'took': watch.elapsed()})

    def settle(self, volume) -> None:
        """End a migration that a stopped cinder-volume left under way."""
        self.migrations = []
        for attachment_id in sorted(self.modes):
            try:
                migration = self.volmig.get(self.service, attachment_id)
            except exception.MigrationNotFound:
                continue  # stopped before volmig started it
            if migration['status'] not in states.TERMINAL:
                self.migrations.append(migration)
        targets = objects.VolumeList.get_all(self.ctxt, filters={
            'migration_status': 'target:%s' % volume.id})
        if volume.migration_status == 'migrating':
            self.cancel()
            for target in targets:
                self.manager._clean_temporary_volume(self.ctxt, volume,
                                                     target)
            reason = 'every guest went back to it'
        else:
            reason = ('a guest may be on volume(s) %s: recover volmig '
                      'migration(s) %s (volmig-manage migration recover)'
                      % (', '.join(t.id for t in targets) or '-',
                         ', '.join(m['id'] for m in self.migrations)
                         or '-'))
        volume.migration_status = 'error'
        if volume.status == 'retyping':
            volume.status = 'in-use'
        volume.save()
        LOG.warning('cinder-volume stopped while it migrated attached '
                    'volume %(id)s; %(reason)s',
                    {'id': volume.id, 'reason': reason})

    def start(self) -> None:
        """Each attachment onto its overlay, or none."""
        for attachment_id in sorted(self.modes):
            try:
                migration = self.volmig.start(self.service, attachment_id,
                                              wait=False)
                self.migrations.append(migration)
                if migration['status'] == states.QUEUED:
                    self.volmig.wait_for(self.service, migration['id'],
                                         states.STARTED, CONF.volmig.timeout)
            except Exception as exc:
                self.cancel()
                raise StartRefused(
                    reason='volmig did not start attachment %s of volume '
                    '%s: %s' % (attachment_id, self.volume_id,
                                exception.safe_message(exc))) from exc
        LOG.info('volmig started %(count)d attachment(s) of volume %(id)s: '
                 'nothing writes to it now',
                 {'count': len(self.migrations), 'id': self.volume_id})

    def cancel(self) -> None:
        """Every started attachment back onto the old volume."""
        for migration in self.migrations:
            try:
                current = self.volmig.get(self.service, migration['id'])
                if current['status'] in (states.STARTED, states.QUEUED):
                    self.volmig.cancel(self.service,
                                       migration['src_attachment_id'])
                self.volmig.wait_for(self.service, migration['id'],
                                     states.CANCELLED, CONF.volmig.timeout)
            except Exception:
                LOG.exception('volmig could not take attachment %s back '
                              'onto volume %s', migration['src_attachment_id'],
                              self.volume_id)

    def prepare(self, new_volume) -> None:
        """The first guest's attachment to the new volume, connected for
        its host with the connector of its old attachment (the one volmig
        gave), while Cinder copies: volmig's complete then uses it as it
        is. Only the first: Cinder reserves a volume for one new
        attachment until it is complete. Whatever fails here is left to
        the complete, which connects a reserved attachment itself."""
        migration = self.migrations[0]
        src_id = migration['src_attachment_id']
        api = cinder_api.API()
        try:
            dst = api.attachment_create(
                self.ctxt, new_volume, migration['instance_uuid'],
                attach_mode=self.modes[src_id])
            self.prepared[src_id] = dst
            api.attachment_update(self.ctxt, dst, objects.VolumeAttachment.
                                  get_by_id(self.ctxt, src_id).connector)
        except Exception:
            LOG.warning('Could not connect the new attachment of volume '
                        '%(id)s during the copy; the complete will',
                        {'id': self.volume_id}, exc_info=True)

    def complete(self, volume, new_volume) -> None:
        """Each guest onto the new volume, then the old attachments go."""
        done = []
        try:
            for migration in self.migrations:
                src_id = migration['src_attachment_id']
                dst = self.prepared.pop(src_id, None) or cinder_api.API(
                    ).attachment_create(self.ctxt, new_volume,
                                        migration['instance_uuid'],
                                        attach_mode=self.modes[src_id])
                self.volmig.complete(self.service, src_id, dst.id,
                                     wait=False)
                self._wait_switched(migration['id'], dst)
                done.append(migration['id'])
        except Exception as exc:
            self.migrations = [m for m in self.migrations
                               if m['id'] not in done]
            self.cancel()
            raise cinder_exception.VolumeMigrationFailed(
                reason='volmig switched the guests of migration(s) [%s] of '
                'volume %s to volume %s, and not those of [%s], which went '
                'back: %s. Both volumes are kept' % (
                    ', '.join(done), self.volume_id, new_volume.id,
                    ', '.join(m['id'] for m in self.migrations),
                    exception.safe_message(exc))) from exc
        for attachment_id in sorted(self.modes):
            self.manager.attachment_delete(self.ctxt, attachment_id, volume)
            volume.finish_detach(attachment_id)
        LOG.info('volmig switched every guest of volume %(id)s to %(new)s',
                 {'id': self.volume_id, 'new': new_volume.id})

    def _wait_switched(self, migration_id: str, attachment) -> None:
        """Until volmig completes the new attachment, just after the guest
        is on it, or the migration ends short of it. Until Cinder records
        the volume in use, a moment after the attachment, it reserves the
        volume for no other attachment."""
        deadline = time.monotonic() + CONF.volmig.timeout
        while True:
            # The migration first: one that ended had completed the
            # attachment before, if it ever does.
            migration = self.volmig.get(self.service, migration_id)
            attachment.refresh()
            volume_id = attachment.volume_id
            if (attachment.attach_status == fields.VolumeAttachStatus.ATTACHED
                    and objects.Volume.get_by_id(
                        self.ctxt, volume_id).status != 'attaching'):
                return
            if (migration['status'] in states.TERMINAL
                    or time.monotonic() > deadline):
                raise exception.MigrationFailed(
                    migration_id=migration_id,
                    reason=migration['error_reason'] or 'it is %s, and '
                    'attachment %s is %s' % (migration['status'],
                                             attachment.id,
                                             attachment.attach_status))
            time.sleep(POLL_INTERVAL)

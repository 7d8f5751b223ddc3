"""One attached volume's migration inside cinder-volume
(``volmig.cinder_volume.manager``): volmig starts each attachment, Cinder
copies, volmig completes each onto the new volume, or cancels."""

import contextlib
import time

from cinder import exception as cinder_exception
from cinder import objects
from cinder.objects import fields
from cinder.volume import api as cinder_api
from cinder.volume import manager as cinder_manager
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import client
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.cinder_volume import opts

CONF = cfg.CONF
opts.register_opts(CONF)
LOG = logging.getLogger(__name__)
# Seconds between looks at a switch under way (a guest waits on its
# overlay meanwhile): a database read and one small call.
POLL_INTERVAL = 0.05


class StartRefused(cinder_exception.VolumeMigrationFailed):
    """volmig started no attachment; nothing was made or changed. One line
    of cinder-volume's log says why: a traceback would say nothing more."""


class AttachedMigration:
    """One attached volume's migration: volmig's, per attachment."""

    def __init__(self, volmig: client.MigrationClient,
                 volume_manager: cinder_manager.VolumeManager, ctxt,
                 volume):
        self.volmig = volmig
        # Once a guest may be on its overlay, no answer is no failure: the
        # calls after start are asked again while their answer is lost
        # (volmig-api or its conductor restarting).
        self.patient = volmig.patient()
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
                current = self.patient.get(self.service, migration['id'])
                # Asked again while cancelling: a cancel whose answer was
                # lost may never have reached the agent; volmig sends it.
                if current['status'] in (states.STARTED, states.QUEUED,
                                         states.CANCELLING):
                    self.patient.cancel(self.service,
                                        migration['src_attachment_id'])
                self.patient.wait_for(self.service, migration['id'],
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
                self.patient.complete(self.service, src_id, dst.id,
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
            migration = self.patient.get(self.service, migration_id)
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

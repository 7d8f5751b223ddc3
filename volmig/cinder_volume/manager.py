"""cinder-volume's manager, with volmig's live migration of attached
volumes.

cinder.conf::

    [DEFAULT]
    volume_manager = volmig.cinder_volume.manager.VolumeManager
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

import threading

from cinder import context
from cinder import coordination
from cinder import objects
from cinder.volume import manager
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import excutils

from volmig import client
from volmig.cinder_volume import attached
from volmig.cinder_volume import opts

CONF = cfg.CONF
opts.register_opts(CONF)
LOG = logging.getLogger(__name__)
class VolumeManager(manager.VolumeManager):

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The attached volumes this process is migrating, by id.
        self._attached: dict[str, attached.AttachedMigration] = {}
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
                attached.AttachedMigration(self._volmig(), self, ctxt,
                                           volume).settle(volume)
            except Exception:
                LOG.exception('Could not settle the interrupted migration '
                              'of volume %s', volume.id)

    @messaging.expected_exceptions(attached.StartRefused)
    def migrate_volume(self, *args, **kwargs):
        return super().migrate_volume(*args, **kwargs)

    @messaging.expected_exceptions(attached.StartRefused)
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
        migration = attached.AttachedMigration(self._volmig(), self, ctxt,
                                               volume)
        self._attached[volume.id] = migration
        try:
            # Before Cinder makes the new volume: a refusal comes before
            # anything is made, and a failure to make it cancels the start.
            with migration.step('start'):
                try:
                    migration.start()
                except attached.StartRefused as exc:
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
                    if not migration.completing:
                        migration.cancel()
        finally:
            del self._attached[volume.id]

    def _copy_volume_data(self, ctxt, src_vol, dest_vol,
                          remote=None) -> None:
        migration = self._attached.get(src_vol.id)
        if migration is None:
            return super()._copy_volume_data(ctxt, src_vol, dest_vol,
                                             remote)
        # The first guest's new attachment is connected while Cinder
        # copies, so that the complete only switches.
        preparing = threading.Thread(target=migration.prepare,
                                     args=(dest_vol,))
        preparing.start()
        try:
            with migration.step('copy'):
                super()._copy_volume_data(ctxt, src_vol, dest_vol, remote)
        finally:
            preparing.join()
        LOG.info('Volume %(src)s copied to %(dst)s while its guests wrote '
                 'to their overlays', {'src': src_vol.id,
                                       'dst': dest_vol.id})

    def migrate_volume_completion(self, ctxt, volume, new_volume,
                                  error=False):
        migration = self._attached.get(volume.id)
        if migration is None or error:
            return super().migrate_volume_completion(ctxt, volume,
                                                     new_volume, error)
        # A guest may be on the new volume from here on: Cinder's cleanup
        # deletes it only while the volume is still 'migrating'.
        volume.migration_status = 'completing'
        volume.save()
        migration.completing = True
        with migration.step('complete'):
            migration.complete(volume, new_volume)
        # The completion casts the delete of the old data, which carries
        # the new volume's id by then, before it moves the new attachments
        # onto the volume's id: a delete that came first would delete them
        # with it. The delete takes this lock first.
        with coordination.COORDINATOR.get_lock(
                '%s-delete_volume' % new_volume.id), migration.step(
                    'cinder'):
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

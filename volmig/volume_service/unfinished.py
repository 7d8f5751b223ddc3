"""How volmig-volume takes back the moves that a restart cut off, and
settles the moves that failed with a guest perhaps on dst.

A move that fails once a complete may have switched a guest keeps both
volumes (``Mover._abandon``): only the guests' migrations can say where
each guest is, and a failed one says so once it is recovered. Then the
volume's record follows its guests (``settle_failed``): every guest on
dst, and dst becomes the volume; every guest on src, and dst goes. Until
then ``volmig-manage volume list`` shows the move as unsettled.
"""

import typing

from oslo_log import log as logging

from volmig import client
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import states

LOG = logging.getLogger(__name__)

ERROR = 'error'


def guest_may_be_on_dst(migration: dict) -> bool:
    """Whether the complete of this migration may have switched a guest."""
    if migration['status'] == states.ERROR:
        return (migration['recovery_needed']
                and migration['error_phase'] in states.COMPLETE_REQUESTED)
    return migration['status'] in states.COMPLETE_REQUESTED


def side(migration: dict, dst: dict) -> str | None:
    """Where the migration's guest is: ``src``, ``dst``, or None while
    nobody knows yet (under way, or failed and not recovered)."""
    if migration['status'] in client.SRC_RELEASED_OR_LATER:
        return 'dst'
    if (migration['status'] not in states.TERMINAL
            or guest_may_be_on_dst(migration)):
        return None
    # Ended off dst's path: cancelled, failed before its complete, or
    # recovered by an operator. A guest recovered onto dst had dst's
    # attachment completed, as a switch does.
    attached = {attachment['id'] for attachment in dst['attachments']
                if attachment['attach_status'] == states.ATTACH_ATTACHED}
    return 'dst' if migration['dst_attachment_id'] in attached else 'src'


class UnfinishedMoves:
    """The recovery methods of ``Mover``."""

    if typing.TYPE_CHECKING:
        volumes: typing.Any
        conf: typing.Any
        client: typing.Any
        patient: typing.Any
        resumed: bool
        _interrupted: list[dict]
        _executor: typing.Any

        def _migrations(self, ctxt, volume: dict) -> list[dict]: ...

        def _finish(self, ctxt, volume_id: str, max_bytes_per_second: int,
                    copied: bool = False) -> None: ...

        def _abandon(self, ctxt, volume_id, dst, reason) -> None: ...

        def _drop_src(self, volume_id: str) -> None: ...

        def _drop_dst(self, dst: dict) -> None: ...

        def _after_end(self) -> None: ...

    def resume_after_restart(self) -> None:
        """Once volmig-api answers: resume or roll back what
        ``find_interrupted`` found."""
        if not self._interrupted:
            self.resumed = True
            return
        ctxt = volmig_context.get_service_context()
        try:
            self.client.list(ctxt, status=states.ACCEPTED)
        except rpc.LOST:
            LOG.warning('volmig-api does not answer yet; resuming the '
                        'migrations under way later')
            return
        volumes, self._interrupted = self._interrupted, []
        for volume in volumes:
            try:
                self._resume(ctxt, volume)
            except Exception:
                LOG.exception('Could not resume the migration of volume %s',
                              volume['id'])
        self.resumed = True

    def _resume(self, ctxt, volume: dict) -> None:
        volume_id = volume['id']
        if volume['migration_status'] == 'success':
            self._drop_src(volume_id)
            return
        dst = (self.volumes.get_volume(ctxt, volume['migration_dst'])
               if volume['migration_dst'] else None)
        if volume['migration_status'] == 'starting' or dst is None:
            LOG.warning('Volume %s: volmig-volume restarted while starting '
                        'its migration; rolling back', volume_id)
            self._abandon(ctxt, volume_id, dst, exception.MigrationFailed(
                migration_id=', '.join(volume['migration_ids']) or '-',
                reason='volmig-volume restarted while starting it'))
            return
        migrations = self._migrations(ctxt, volume)
        if any(guest_may_be_on_dst(m) for m in migrations):
            LOG.warning('Volume %s: resuming its migration at complete',
                        volume_id)
            self._executor.submit(self._finish, ctxt, volume_id, 0, True)
        elif all(m['status'] in (states.STARTED, states.QUEUED)
                 for m in migrations):
            LOG.warning('Volume %s: copying it again from the start',
                        volume_id)
            # The copy skips zeros, so dst must read as zeros again.
            with open(dst['path'], 'r+b') as dst_file:
                dst_file.truncate(0)
                dst_file.truncate(volume['size_mb'] * 1024 * 1024)
            self._executor.submit(
                self._finish, ctxt, volume_id,
                self.conf.storage.max_bandwidth_mbps * 1024 * 1024)
        else:
            self._abandon(ctxt, volume_id, dst, exception.MigrationFailed(
                migration_id=', '.join(volume['migration_ids']),
                reason='it ended while volmig-volume was down'))

    def settle_failed(self) -> None:
        """Each failed move that kept dst, once its guests are known to
        be all on one side: the record follows them. Asked again at the
        next pass while volmig-api does not answer."""
        ctxt = volmig_context.get_service_context()
        for volume in self.volumes.kept_dst(ERROR):
            try:
                self._settle(ctxt, volume)
            except rpc.LOST:
                return
            except Exception:
                LOG.exception('Could not settle the failed migration of '
                              'volume %s', volume['id'])

    def _settle(self, ctxt, volume: dict) -> None:
        volume_id = volume['id']
        dst = self.volumes.get_volume(ctxt, volume['migration_dst'])
        migrations = [self.client.get(ctxt, migration_id)
                      for migration_id in volume['migration_ids']]
        sides = {side(migration, dst) for migration in migrations}
        if sides == {'dst'}:
            self.volumes.adopt(volume_id, dst['id'], {
                migration['src_attachment_id'] for migration in migrations},
                'success')
            self._drop_src(volume_id)
            LOG.warning('Volume %s: its failed migration left every guest '
                        'on dst; the volume now lives in pool %s',
                        volume_id, dst['pool'])
            self._after_end()
        elif sides <= {'src'}:
            self._drop_dst(dst)
            self.volumes.update_volume(
                volume_id, migration_dst=None,
                migration_error='%s; every guest is back on src'
                % volume['migration_error'])
            LOG.warning('Volume %s: its failed migration left every guest '
                        'on src; dst %s is deleted', volume_id, dst['id'])
            self._after_end()

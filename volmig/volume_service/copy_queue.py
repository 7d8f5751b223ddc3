"""The copy cap of volmig-volume's pool moves, and the queue behind it.

``[storage] max_concurrent_copies`` caps the moves under way into or out
of each pool. One over it is ``queued`` before anything is made for it,
so no guest waits on an overlay for a slot, and begins in order, oldest
first, when a move of its pools ends. A pool's count of moves and the
claim it decides are one, under one lock.
"""

import threading
import typing

from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import context as volmig_context
from volmig import exception
from volmig import states

LOG = logging.getLogger(__name__)


class CopyQueue:
    """The cap's part of ``pool_moves.Mover``."""

    if typing.TYPE_CHECKING:
        volumes: typing.Any
        conf: typing.Any
        _executor: typing.Any
        _slots: threading.Lock
        on_end: typing.Callable[[], None]

        def _start(self, service, volume_id: str, pool: str,
                   max_bandwidth_mbps: int | None) -> dict: ...

    def _after_end(self) -> None:
        """A slot is free: start queued migrations off this thread."""
        try:
            self._executor.submit(self._ended)
        except RuntimeError:
            LOG.info('volmig-volume is stopping: the queued migrations '
                     'start after its restart')

    def _pool_full(self, volume: dict, pool: str) -> str | None:
        """Which of the migration's pools has no copy slot free."""
        cap = self.conf.storage.max_concurrent_copies
        if not cap:
            return None
        busy = self.volumes.with_migration_under_way(states.POOL_MOVE_COPYING)
        for name in (volume['pool'], pool):
            count = sum(1 for other in busy
                        if other['migration_status']
                        in states.POOL_MOVE_COPYING
                        and name in (other['pool'], other['migration_pool']))
            if count >= cap:
                return name
        return None

    def _claim(self, volume_id: str, pool: str,
               max_bandwidth_mbps: int | None, queue: bool) -> dict:
        """Mark the volume as migrating (or queued), or refuse."""
        volume = self.volumes.get_volume(None, volume_id)
        if volume['migration_status'] in states.POOL_MOVE_UNDER_WAY:
            raise exception.MigrationInProgress(
                what='volume %s' % volume_id,
                reason='it is already migrating to pool %s'
                % volume['migration_pool'])
        if volume['migration_source']:
            raise exception.Invalid(
                reason='volume %s is the target of a migration' % volume_id)
        if volume['pool'] == pool:
            raise exception.Invalid(reason='volume %s is in pool %s '
                                    'already' % (volume_id, pool))
        with self._slots:
            full = self._pool_full(volume, pool)
            if full and not queue:
                raise exception.NoCopySlot(pool=full)
            try:
                return self.volumes.update_volume(
                    volume_id, expected_status=(volume['migration_status'],),
                    no_attach_under_way=not full,
                    migration_status=(states.POOL_MOVE_QUEUED if full
                                      else states.POOL_MOVE_STARTING),
                    migration_pool=pool, migration_progress=0,
                    migration_error=('pool %s has no copy slot free '
                                     '([storage] max_concurrent_copies)'
                                     % full if full else None),
                    migration_queued_at=timeutils.utcnow(),
                    migration_max_bandwidth_mbps=max_bandwidth_mbps,
                    migration_ids=[], migration_dst=None,
                    migration_copy_started_at=None,
                    migration_copy_ended_at=None)
            except exception.VolumeStatusChanged as exc:
                raise exception.MigrationInProgress(
                    what='volume %s' % volume_id, reason=exc.message)

    def _take_slot(self, volume: dict) -> bool:
        """Move a queued migration to ``starting`` if its pools allow."""
        with self._slots:
            if self._pool_full(volume, volume['migration_pool']):
                return False
            try:
                self.volumes.update_volume(
                    volume['id'], expected_status=(states.POOL_MOVE_QUEUED,),
                    no_attach_under_way=True,
                    migration_status=states.POOL_MOVE_STARTING,
                    migration_error=None)
            except (exception.VolumeStatusChanged, exception.Conflict):
                # Taken by another, or an attach is under way: it stays
                # queued, and is tried again when the next move ends.
                return False
        return True

    def _ended(self) -> None:
        self.start_queued()
        self.on_end()

    def start_queued(self) -> None:
        """Begin the queued migrations the caps now allow, oldest first."""
        service = volmig_context.get_service_context()
        for volume in self.volumes.queued_migrations(states.POOL_MOVE_QUEUED):
            if self._take_slot(volume):
                LOG.info('Volume %s leaves the copy queue', volume['id'])
                try:
                    self._start(service, volume['id'],
                                volume['migration_pool'],
                                volume['migration_max_bandwidth_mbps'])
                except Exception:
                    LOG.exception('Queued migration of volume %s failed '
                                  'to start', volume['id'])

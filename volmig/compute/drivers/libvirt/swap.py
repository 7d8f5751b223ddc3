"""The legacy swap on a libvirt domain: a full block copy onto the new
volume, and a pivot once it is ready, as Nova's swap-volume does. A guest
that is off is copied with qemu-img. Kept as the baseline the overlay
migration is measured against.
"""

import typing

import libvirt

from volmig import exception
from volmig.compute.drivers import base
from volmig.compute.drivers import journal as journal_mod
from volmig.compute.drivers.libvirt import domain
from volmig.compute.drivers.libvirt import jobs


class LegacySwap:
    """The swap methods of ``LibvirtDriver``."""

    if typing.TYPE_CHECKING:
        journal: journal_mod.Journal
        volumes: typing.Any

        def _guest(self, instance) -> domain.Guest: ...

        def _img(self, *args: str) -> None: ...

        def live_domain(self, guest: domain.Guest) -> typing.Any: ...

        def repoint(self, guest, disk, new_bdm, path: str) -> None: ...

        @staticmethod
        def _swappable(guest, old_bdm) -> dict: ...

    def swap_volume(self, instance, old_bdm, new_bdm):
        guest = self._guest(instance)
        new_path = self.volumes.path(new_bdm['connection_info'])
        key = journal_mod.swap_key(new_bdm)
        with guest.lock:
            disk = self._swappable(guest, old_bdm)
            self.journal.record(key, 'mirror', action='swap',
                                instance_uuid=guest.uuid, old_bdm=old_bdm,
                                new_bdm=new_bdm)
            found = self.live_domain(guest)
            if found is None:
                self._img('convert', '-n', '-f', 'raw', '-O', 'raw',
                          disk['path'], new_path)
                self.repoint(guest, disk, new_bdm, new_path)
                self.journal.close(key)
                return base.FinishedJob()
            try:
                found.blockCopy(disk['target'],
                                domain.copy_xml(new_path, 'raw'), None,
                                libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT)
            except libvirt.libvirtError as exc:
                self.journal.close(key)
                raise exception.DriverError(
                    action='swap volume %s' % disk['volume_id'],
                    reason=exc.get_error_message())
            return jobs.SwapJob(typing.cast(typing.Any, self), guest, disk,
                                new_bdm, new_path)

    def swap_recover(self, entry: dict) -> base.Job:
        """Settle a swap an agent crash cut short.

        The guest is on the new volume once the copy pivoted (libvirt's
        live XML says so, or the journal for a guest that is down): then
        the record follows. A copy libvirt still runs is resumed. Else the
        guest stays on the old volume, and this raises.
        """
        old_bdm, new_bdm = entry['old_bdm'], entry['new_bdm']
        new_path = self.volumes.path(new_bdm['connection_info'])
        key = journal_mod.swap_key(new_bdm)
        guest = self._guest({'uuid': entry['instance_uuid']})
        with guest.lock:
            disk = (guest.disks.get(old_bdm['volume_id'])
                    or guest.disks.get(new_bdm['volume_id']))
            if disk is None or disk['volume_id'] == new_bdm['volume_id']:
                self.journal.close(key)
                return base.FinishedJob()
            found = self.live_domain(guest)
            if found is None:
                pivoted = entry['step'] == 'release_old'
            elif found.blockJobInfo(disk['target'], 0):
                return jobs.SwapJob(typing.cast(typing.Any, self), guest,
                                    disk, new_bdm, new_path)
            else:
                live = domain.live_disk(found.XMLDesc(0), disk['target'])
                pivoted = live is not None and live['source'] == new_path
            self.journal.close(key)
            if pivoted:
                self.repoint(guest, disk, new_bdm, new_path)
                return base.FinishedJob()
            raise exception.DriverError(
                action='swap volume %s' % old_bdm['volume_id'],
                reason='the agent stopped before the copy was done; the '
                'guest stays on the old volume')

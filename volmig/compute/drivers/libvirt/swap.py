"""The legacy swap on a libvirt domain: libvirt's part of each step
(``volmig.compute.drivers.steps`` keeps their order). A full block copy
onto the new volume, and a pivot once it is ready.
"""

import typing

import libvirt

from volmig import exception
from volmig.compute.drivers import base
from volmig.compute.drivers import steps
from volmig.compute.drivers.libvirt import domain
from volmig.compute.drivers.libvirt import jobs


class LegacySwap(steps.SwapSteps):
    """libvirt's part of a legacy swap; mixed into ``LibvirtDriver``."""

    def _mirror(self, guest, found, disk, new_bdm,
                new_path: str) -> base.Job:
        try:
            found.blockCopy(disk['target'], domain.copy_xml(new_path, 'raw'),
                            None, libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT)
        except libvirt.libvirtError as exc:
            raise exception.DriverError(
                action='swap volume %s' % disk['volume_id'],
                reason=exc.get_error_message())
        return self._swap_job(guest, disk, new_bdm, new_path)

    def _swap_job(self, guest, disk, new_bdm, new_path: str) -> base.Job:
        return jobs.SwapJob(typing.cast(typing.Any, self), guest, disk,
                            new_bdm, new_path)

    def _running_swap(self, guest, found, disk, new_bdm,
                      new_path: str) -> base.Job | None:
        if found.blockJobInfo(disk['target'], 0):
            return self._swap_job(guest, disk, new_bdm, new_path)
        return None

    def _swapped(self, guest, found, disk, entry: dict,
                 new_path: str) -> bool:
        # libvirt's live XML says where a running guest is; the journal
        # says it for a guest that is down.
        if found is None:
            return entry['step'] == 'release_old'
        live = domain.live_disk(found.XMLDesc(0), disk['target'])
        return live is not None and live['source'] == new_path

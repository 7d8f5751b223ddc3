"""The legacy swap on a QEMU guest: QEMU's part of each step
(``volmig.compute.drivers.steps`` keeps their order). A
``blockdev-mirror`` from src to dst, pivoting when ready.
"""

from volmig.compute.drivers import base
from volmig.compute.drivers import steps
from volmig.compute.drivers.qemu import disks
from volmig.compute.drivers.qemu import jobs
from volmig.compute.drivers.qemu import settle


class LegacySwap(steps.SwapSteps):
    """QEMU's part of a legacy swap; mixed into QemuDriver."""

    def _mirror(self, guest, live, disk, new_bdm,
                new_path: str) -> base.Job:
        names = disks.node_names(disk)
        target = disks.node_names(dict(disk, gen=disk['gen'] + 1))
        guest.add_volume_node(target['base'], new_path, read_only=False)
        job = jobs.MirrorJob(self, guest, disk, new_bdm, new_path)
        try:
            guest.execute('blockdev-mirror', **{
                'job-id': job.job_id, 'device': names['base'],
                'target': target['base'], 'sync': 'full',
                'auto-dismiss': False})
        except Exception:
            guest.delete_nodes(target['base'])
            raise
        return job

    def _running_swap(self, guest, live, disk, new_bdm,
                      new_path: str) -> base.Job | None:
        job = jobs.MirrorJob(self, guest, disk, new_bdm, new_path)
        return job if jobs.find_job(guest, job.job_id) is not None else None

    def _swapped(self, guest, live, disk, entry: dict,
                 new_path: str) -> bool:
        if live is not None:
            settle.settle(guest, disk)
        elif entry['step'] == 'release_old':
            # The pivot is behind it; the record was not updated yet.
            disk.update(path=new_path, gen=disk['gen'] + 1)
        return disk['path'] == new_path

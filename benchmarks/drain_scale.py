"""A drain's cost per volume, 20 volumes against 500.

    python -m benchmarks.drain_scale [--small 20] [--large 500]
        [--size-mb 1] [--max-parallel 4]

volmig-volume (file volumes) drains pool-a into pool-b, once holding
``--small`` volumes and once ``--large``, in the same run: each volume
unattached, ``--size-mb`` of random data. It prints each drain's seconds
per volume, the dd of the same files (their sum, per volume) as the
floor, and the large drain's cost per volume against the small one's:
what a drain spends on each volume beyond the copy must not grow with the
pool.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

from benchmarks import data_path  # noqa: E402
from benchmarks import polling  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import block_storage  # noqa: E402
from volmig import context as volmig_context  # noqa: E402


def drained(count: int, size_mb: int, parallel: int, pools: dict) -> tuple:
    """Seconds per volume of a drain of ``count`` volumes, and of a dd of
    each of their files."""
    admin = volmig_context.get_admin_context()
    volumes = block_storage.get_adapter()
    created = []
    for _ in range(count):
        vol = volumes.create_volume(admin, size_mb, pool='pool-a')
        data_path.random_file(vol['path'], size_mb)
        created.append(vol)
    data_path.drop_caches()
    dd = 0.0
    for vol in created:
        dst = os.path.join(pools['pool-b'], 'dd-%s' % vol['id'])
        dd += data_path.timed(lambda v=vol, d=dst: data_path.dd_direct(
            v['path'], d))
        os.unlink(dst)
    data_path.drop_caches()
    began = time.perf_counter()
    volumes.drain_pool(admin, 'pool-a', 'pool-b', max_parallel=parallel)
    polling.drained(volumes, admin, 'pool-a', expected=count, timeout=3600)
    elapsed = time.perf_counter() - began
    for vol in created:
        volumes.delete_volume(admin, vol['id'])
    return elapsed / count, dd / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--small', type=int, default=20)
    parser.add_argument('--large', type=int, default=500)
    parser.add_argument('--size-mb', type=int, default=1)
    parser.add_argument('--max-parallel', type=int, default=4)
    args = parser.parse_args()
    with cluster.qemu_cluster({('DEFAULT', 'report_interval'): 2}) as (
            _, pools):
        figures = {count: drained(count, args.size_mb, args.max_parallel,
                                  pools)
                   for count in (args.small, args.large)}
    print('drain of unattached %d MiB volumes, --max-parallel %d:'
          % (args.size_mb, args.max_parallel))
    for count, (per_volume, dd) in figures.items():
        print('  %4d volumes: %.3f s per volume (dd of the same file: '
              '%.3f s)' % (count, per_volume, dd))
    small, large = figures[args.small][0], figures[args.large][0]
    print('cost per volume, %d volumes against %d: %.2fx'
          % (args.large, args.small, large / small))


if __name__ == '__main__':
    main()

"""The qemu driver's data path under a steady guest write load.

Separate volmig-conductor, volmig-api, volmig-volume and volmig-compute
(qemu driver) processes on a RabbitMQ vhost of their own. One guest
boots from a volume (1 GiB by default) in pool-a and writes 64 KiB blocks
without pause through its disk's NBD export, while volmig-volume migrates
the volume to pool-b. It prints:

* the guest I/O pause at start and at complete: the QMP round trip of the
  steps that drain I/O (blockdev-snapshot; blockdev-reopen and
  job-complete), as the agent recorded them, next to the slowest guest
  write around each moment;
* copy throughput against ``dd`` of the same file on the same disk,
  run here first (the copy's own time, as volmig-volume records it);
* the total migration time, and whether dst matches the guest's writes;
* the compute agent's RSS, idle and after the migration.

The pause a real guest lives, on each driver, is
``benchmarks.guest_pauses``.

Then, on the same disk, against the baselines (``--only baselines``):

* cold caches (dropped as root, else fresh files): ``dd bs=4M
  oflag=direct`` against volmig's verified copy (src hashed as it is
  read, dst written O_DIRECT and read back from the disk), on the
  O_DIRECT path and with the kernel's copy_file_range;
* the new path against the legacy mirror swap of the same volume under
  the same NBD write load: total time, guest write latency p50/p99/max;
* a drain of 20 volumes (a mix of sizes, four attached to running
  guests, ``--drain-attached N`` for N) at --max-parallel 1, 2 and 4,
  against the sum of plain ``dd`` copies of the same files.

``--no-pacing`` turns ``[storage] copy_pacing`` off for every copy.

Targets: pause <= 5 ms at start and <= 25 ms at complete; copy >= 0.9x
dd; verified copy <= 1.5x cold dd; the new path's total <= 1.0x the
mirror, with a lower p99. The first part alone is ``--only pauses``.
The guest's latency window by window is ``benchmarks.guest_stalls``.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402  # nosec B404
import time  # noqa: E402

from benchmarks import polling  # noqa: E402
from tests import nbd_writer as guest_io  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import block_storage  # noqa: E402
from volmig import client  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import states  # noqa: E402
from volmig.conductor import operator_rpcapi  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402
from volmig.datapath import copy as verified_copy  # noqa: E402
from volmig.demo import writes as guest_writes  # noqa: E402

MIB = 1024 * 1024


def rss_mib(pid: int) -> float:
    with open('/proc/%d/status' % pid) as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return 0.0


def dd_mib_per_second(path: str, pool_dir: str, size_mb: int) -> float:
    """dd of the volume's file into the destination pool, fsynced."""
    target = os.path.join(pool_dir, 'dd-baseline')
    began = time.perf_counter()
    subprocess.run(['dd', 'if=%s' % path, 'of=%s' % target, 'bs=4M',  # nosec
                    'conv=fsync'], check=True, capture_output=True)
    elapsed = time.perf_counter() - began
    os.unlink(target)
    return size_mb / elapsed


def percentiles(latencies: list[float]) -> str:
    return ('p50 %.2f ms, p99 %.2f ms, max %.2f ms'
            % guest_writes.spread(latencies))


def drop_caches() -> bool:
    """Write back and drop the page cache; False where not allowed."""
    os.sync()
    try:
        with open('/proc/sys/vm/drop_caches', 'w') as caches:
            caches.write('3\n')
        return True
    except OSError:
        return False


def random_file(path: str, size_mb: int) -> None:
    subprocess.run(['dd', 'if=/dev/urandom', 'of=%s' % path,  # nosec
                    'bs=4M', 'count=%d' % (size_mb // 4)], check=True,
                   capture_output=True)


def timed(action) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def dd_direct(src: str, dst: str) -> None:
    subprocess.run(['dd', 'if=%s' % src, 'of=%s' % dst, 'bs=4M',  # nosec
                    'oflag=direct'], check=True, capture_output=True)


def copy_and_verify(src: str, dst: str, offload: bool) -> None:
    """What volmig-volume does: copy, hashing src, and check dst from the
    disk behind it (CopyMismatch if it does not verify)."""
    # volmig-volume creates dst, sparse, at src's size.
    with open(dst, 'xb') as handle:
        handle.truncate(os.path.getsize(src))
    CONF.set_override('copy_offload', offload, 'storage')
    try:
        verified_copy.checked_copy(src, dst, CONF, 'cold')
    finally:
        CONF.clear_override('copy_offload', 'storage')


def run_cold_copy(size_mb: int, pools: dict) -> None:
    """dd against the verified copy, each from a cold cache."""
    src = os.path.join(pools['pool-a'], 'cold-src')
    random_file(src, size_mb)
    dst = os.path.join(pools['pool-b'], 'cold-dst')
    dropped = drop_caches()
    dd_time = timed(lambda: dd_direct(src, dst))
    os.unlink(dst)
    print()
    print('cold cache (%s), %d MiB of random data:'
          % ('dropped' if dropped else 'NOT dropped: not root', size_mb))
    print('  dd bs=4M oflag=direct:                   %6.2f s %5.0f MiB/s'
          % (dd_time, size_mb / dd_time))
    for offload, name in ((False, 'O_DIRECT read+hash, write, verify'),
                          (True, 'copy_file_range, verify from disk')):
        drop_caches()
        elapsed = timed(lambda o=offload: copy_and_verify(src, dst, o))
        os.unlink(dst)
        print('  verified copy, %s: %6.2f s %5.0f MiB/s -> %.2fx dd '
              '(target <= 1.5x)' % (name, elapsed, size_mb / elapsed,
                                    elapsed / dd_time))
    os.unlink(src)


def start_load(server_uuid: str, volume_id: str, size_mb: int):
    """The steady NBD write load over the whole volume; a second to
    settle."""
    writer = guest_io.GuestWriter(
        guest_io.nbd_socket(os.path.join(CONF.state_path, 'compute'),
                            server_uuid), volume_id)
    load = guest_io.WriteLoad(writer, size_mb * MIB)
    load.start()
    time.sleep(1)
    return writer, load


def stop_load(writer, load) -> None:
    time.sleep(0.5)
    load.stop()
    writer.close()
    if load.error:
        raise SystemExit('a guest write failed: %s' % load.error)


def _server(conductor, admin, volume_id: str) -> dict:
    [server] = conductor.build_instances(
        admin, 'bench', [{'volume_id': volume_id, 'boot_index': 0}], 1,
        None)
    return polling.until(
        lambda: conductor.instance_get(admin, server['uuid']),
        lambda s: s['vm_state'] == states.VM_ACTIVE, 'the server to build')


def run_against_mirror(size_mb: int, pools: dict) -> None:
    """The same volume, the same write load: volmig's path, then the
    legacy mirror swap back to the first pool."""
    admin = volmig_context.get_admin_context()
    conductor = operator_rpcapi.OperatorAPI()
    volumes = block_storage.get_adapter()
    vol = volumes.create_volume(admin, size_mb, pool='pool-a')
    random_file(vol['path'], size_mb)
    server = _server(conductor, admin, vol['id'])
    results = {}

    def under_load(name, migrate, done):
        writer, load = start_load(server['uuid'], vol['id'], size_mb)
        began = time.perf_counter()
        migrate()
        polling.until(lambda: None, lambda _: done(), name, timeout=600,
                      interval=0.05)
        results[name] = (time.perf_counter() - began,
                         [w[4] for w in writer.writes if w[3] >= began])
        stop_load(writer, load)

    def moved():
        current = volumes.get_volume(admin, vol['id'])
        if current['migration_status'] == 'error':
            raise SystemExit('migration failed: %s'
                             % current['migration_error'])
        return (current['migration_status'] == 'success'
                and client.MigrationClient().get(
                    volmig_context.get_service_context(),
                    current['migration_ids'][0])['status']
                == states.COMPLETED)

    under_load('volmig', lambda: volumes.migrate_volume(
        admin, vol['id'], 'pool-b', 0), moved)
    new = volumes.create_volume(admin, size_mb, pool='pool-a')

    def swapped():
        found = conductor.instance_get(admin, server['uuid'])
        return (found['task_state'] is None and
                found['block_devices'][0]['volume_id'] == new['id'])

    under_load('mirror', lambda: conductor.swap_volume(
        admin, server['uuid'], vol['id'], new['id']), swapped)
    conductor.delete_instance(admin, server['uuid'])
    # Swapped away, in pool-b: left there, the drains back from pool-b
    # would move it too, half as much again as the drain from pool-a
    # and its dd baseline.
    volumes.delete_volume(admin, vol['id'])
    print()
    print('%d MiB volume under a steady NBD write load (64 KiB writes):'
          % size_mb)
    for name in ('volmig', 'mirror'):
        total, latencies = results[name]
        print('  %-6s total %6.2f s, %5d writes, latency %s'
              % (name, total, len(latencies), percentiles(latencies)))
    print('  volmig / mirror total: %.2fx (target <= 1.0x)'
          % (results['volmig'][0] / results['mirror'][0]))


DRAIN_SIZES_MB = (16, 32, 48, 64, 96, 128, 16, 32, 48, 64,
                  16, 32, 48, 64, 96, 16, 32, 48, 64, 32)


def run_drain(pools: dict, attached: int) -> None:
    """20 volumes drained back and forth at several --max-parallel, the
    first ``attached`` of them attached to running guests."""
    admin = volmig_context.get_admin_context()
    conductor = operator_rpcapi.OperatorAPI()
    volumes = block_storage.get_adapter()
    created = []
    for size in DRAIN_SIZES_MB:
        vol = volumes.create_volume(admin, size, pool='pool-a')
        random_file(vol['path'], size)
        created.append(vol)
    servers = [_server(conductor, admin, vol['id'])
               for vol in created[:attached]]
    # The drain moves what else the pool holds too (the mirror run's
    # volume): the dd baseline copies the same set, which every drain
    # moves, pool-b holding nothing else.
    listed = volumes.list_volumes(admin)
    created = [vol for vol in listed if vol['pool'] == 'pool-a']
    held = [vol['id'] for vol in listed if vol['pool'] == 'pool-b']
    if held:
        raise SystemExit('pool-b holds volumes the drains would move: %s'
                         % ', '.join(held))
    total_mb = sum(vol['size_mb'] for vol in created)
    drop_caches()
    dd_sum = 0.0
    for vol in created:
        dst = os.path.join(pools['pool-b'], 'dd-%s' % vol['id'])
        dd_sum += timed(lambda v=vol, d=dst: dd_direct(v['path'], d))
        os.unlink(dst)
    print()
    print('drain of %d volumes (%d MiB, %d attached to running guests):'
          % (len(created), total_mb, attached))
    print('  sum of dd bs=4M oflag=direct copies: %6.2f s' % dd_sum)
    source, target = 'pool-a', 'pool-b'
    for parallel in (1, 2, 4):
        drop_caches()
        began = time.perf_counter()
        volumes.drain_pool(admin, source, target, max_parallel=parallel)
        drain = polling.drained(volumes, admin, source)
        elapsed = time.perf_counter() - began
        print('  --max-parallel %d: %6.2f s -> %.2fx the dd sum '
              '(%d volumes)' % (parallel, elapsed, elapsed / dd_sum,
                                len(drain['volumes'])))
        source, target = target, source
    for server in servers:
        conductor.delete_instance(admin, server['uuid'])


def run(size_mb: int, compute_pid: int, pools: dict) -> None:
    admin = volmig_context.get_admin_context()
    conductor = conductor_rpcapi.ConductorAPI()
    volumes = block_storage.get_adapter()
    vol = volumes.create_volume(admin, size_mb, pool='pool-a')
    # Real data everywhere, so neither copy can skip zeros.
    subprocess.run(['dd', 'if=/dev/urandom', 'of=%s' % vol['path'],  # nosec
                    'bs=4M', 'count=%d' % (size_mb // 4), 'conv=notrunc'],
                   check=True, capture_output=True)
    with open(vol['path'], 'rb') as handle:
        initial = handle.read()
    server = _server(conductor, admin, vol['id'])
    idle_rss = rss_mib(compute_pid)

    dd_rate = dd_mib_per_second(vol['path'], pools['pool-b'], size_mb)

    writer, load = start_load(server['uuid'], vol['id'], size_mb)
    began = time.perf_counter()
    volumes.migrate_volume(admin, vol['id'], 'pool-b', 0)
    while True:
        current = volumes.get_volume(admin, vol['id'])
        if current['migration_status'] in ('success', 'error'):
            break
        time.sleep(0.05)
    if current['migration_status'] == 'error':
        raise SystemExit('migration failed: %s' % current['migration_error'])
    migrated = client.MigrationClient().wait_for(
        volmig_context.get_service_context(), current['migration_ids'][0],
        states.COMPLETED)
    total = time.perf_counter() - began
    stop_load(writer, load)

    with open(current['path'], 'rb') as handle:
        actual = handle.read()
    exact = (hashlib.sha256(writer.expected_image(initial)).digest()
             == hashlib.sha256(actual).digest())
    pauses = migrated['pauses_ms'] or {}
    copy_rate = size_mb / current['migration_copy_seconds']
    latencies = [w[4] for w in writer.writes]
    print('volume %d MiB, %d guest writes of 64 KiB during the run'
          % (size_mb, len(writer.writes)))
    print('guest write latency: %s' % percentiles(latencies))
    print('pause at start    (blockdev-snapshot): %.2f ms  (target <= 5)'
          % pauses.get('start', float('nan')))
    print('pause at complete (blockdev-reopen):   %.2f ms'
          % pauses.get('switch', float('nan')))
    print('pause at complete (job-complete):      %.2f ms  (target <= 25)'
          % pauses.get('complete', float('nan')))
    print('copy (both fsynced, same files and disk): volmig-volume '
          '%.0f MiB/s, dd bs=4M %.0f MiB/s -> %.2fx dd (target >= 0.9x)'
          % (copy_rate, dd_rate, copy_rate / dd_rate))
    print('total migration (start -> completed, incl. sha256 verify): '
          '%.2f s' % total)
    print('dst matches the guest writes byte for byte: %s' % exact)
    print('compute agent RSS: idle %.1f MiB, after the migration %.1f MiB'
          % (idle_rss, rss_mib(compute_pid)))
    operator_rpcapi.OperatorAPI().delete_instance(admin, server['uuid'])
    volumes.delete_volume(admin, vol['id'])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--size-mb', type=int, default=1024)
    parser.add_argument('--cold-size-mb', type=int, default=2048,
                        help='The cold-cache copy\'s file.')
    parser.add_argument('--only', choices=('pauses', 'baselines'),
                        help='pauses: the pauses at start and complete, the '
                        'copy rate against dd, the total and the RSS; '
                        'baselines: the cold-cache copy against dd, the '
                        'whole path against the legacy mirror, and a '
                        'drain against dd.')
    parser.add_argument('--pacing', action=argparse.BooleanOptionalAction,
                        default=True,
                        help='[storage] copy_pacing, for every copy (on, '
                        'as by default; --no-pacing: off).')
    parser.add_argument('--drain-attached', type=int, default=4,
                        choices=range(len(DRAIN_SIZES_MB) + 1),
                        metavar='N', help='Volumes of the drain attached '
                        'to running guests, which it moves live (4).')
    args = parser.parse_args()

    with cluster.qemu_cluster(
            {('DEFAULT', 'report_interval'): 2,
             ('storage', 'copy_pacing'): args.pacing}) as (services, pools):
        # This process's cold copies too.
        CONF.set_override('copy_pacing', args.pacing, 'storage')
        if args.only != 'baselines':
            run(args.size_mb, services.processes['compute-1'].process.pid,
                pools)
        if args.only != 'pauses':
            run_cold_copy(args.cold_size_mb, pools)
            run_against_mirror(args.size_mb, pools)
            run_drain(pools, args.drain_attached)

if __name__ == '__main__':
    main()

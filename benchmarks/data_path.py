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

Targets (issue 3): pause <= 5 ms at start and <= 25 ms at complete; copy
>= 0.9x dd.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402  # nosec B404
import time  # noqa: E402

from tests import nbd_writer as guest_io  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import client  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import states  # noqa: E402
from volmig import volume  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402

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


def run(size_mb: int, compute_pid: int, pools: dict) -> None:
    admin = volmig_context.get_admin_context()
    conductor = conductor_rpcapi.ConductorAPI()
    volumes = volume.get_adapter()
    vol = volumes.create_volume(admin, size_mb, pool='pool-a')
    # Real data everywhere, so neither copy can skip zeros.
    subprocess.run(['dd', 'if=/dev/urandom', 'of=%s' % vol['path'],  # nosec
                    'bs=4M', 'count=%d' % (size_mb // 4), 'conv=notrunc'],
                   check=True, capture_output=True)
    with open(vol['path'], 'rb') as handle:
        initial = handle.read()
    [server] = conductor.build_instances(
        admin, 'bench', [{'volume_id': vol['id'], 'boot_index': 0}], 1,
        None)
    while conductor.instance_get(admin, server['uuid'])['vm_state'] \
            != states.VM_ACTIVE:
        time.sleep(0.05)
    idle_rss = rss_mib(compute_pid)

    dd_rate = dd_mib_per_second(vol['path'], pools['pool-b'], size_mb)

    writer = guest_io.GuestWriter(
        guest_io.nbd_socket(os.path.join(CONF.state_path, 'compute'),
                            server['uuid']), vol['id'])
    load = guest_io.WriteLoad(writer, size_mb * MIB)
    load.start()
    time.sleep(1)

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
    time.sleep(0.5)
    load.stop()
    writer.close()
    if load.error:
        raise SystemExit('a guest write failed: %s' % load.error)

    with open(current['path'], 'rb') as handle:
        actual = handle.read()
    exact = (hashlib.sha256(writer.expected_image(initial)).digest()
             == hashlib.sha256(actual).digest())
    pauses = migrated['pauses_ms'] or {}
    copy_rate = size_mb / current['migration_copy_seconds']
    latencies = sorted(w[4] for w in writer.writes)
    print('volume %d MiB, %d guest writes of 64 KiB during the run'
          % (size_mb, len(writer.writes)))
    print('guest write latency: p50 %.2f ms, max %.2f ms'
          % (latencies[len(latencies) // 2], latencies[-1]))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--size-mb', type=int, default=1024)
    args = parser.parse_args()

    with cluster.qemu_cluster(
            {('DEFAULT', 'report_interval'): 2}) as (services, pools):
        run(args.size_mb, services.processes['compute-1'].process.pid,
            pools)

if __name__ == '__main__':
    main()

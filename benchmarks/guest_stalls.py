"""What a real guest feels of a migration, window by window, beside the
legacy mirror swap, and where a stall comes from.

    python -m benchmarks.guest_stalls [--driver qemu libvirt] [--runs 5]
        [--size-mb 512] [--copy-io-kb N] [--max-bandwidth-mbps N]
        [--no-pacing] [--drain N] [--outside-seconds S] [--plot FILE]

For each driver: separate volmig-conductor, volmig-api, volmig-volume and
volmig-compute processes on a RabbitMQ vhost of their own, and one
volmig-guest whose writer acknowledges each 4 KiB block (O_DIRECT +
fsync) on its serial console, as fast as it can, on a data volume that
holds ``--size-mb`` of random data for the copy to move. The gaps
between acknowledgements are the guest's write latency as it lives it.
Each run measures, on the same guest, disk and load:

``outside``
    no migration: the guest's own pace, for ``--outside-seconds`` (5);
``overlay alone``
    the guest's writes on a migration's overlay, nothing copied (a
    ``start``, then a ``cancel``);
``copy alone``
    volmig-volume's verified copy of the volume's file (read, hashed,
    written, read back, at the cap), the guest on its volume, no
    overlay;
``start``, ``copy``, ``complete``
    the windows of a whole migration by volmig-volume: its start call;
    the copy and its check; the complete up to the commit's end;
``mirror``
    the legacy swap of the same volume (a full block mirror, then a
    pivot), back to the first pool.

With ``--drain N``, N - 1 more volumes of the same size and data lie in
the guest's pool, and the whole migration is a drain of that pool, N
volumes at once; ``start``, ``copy`` and ``complete`` are still the
guest's volume's, beside the others' copies. The others go back,
untimed, after the mirror.

Each window gives the gaps' p50, p99 and maximum; the last lines give
the median of each over the runs. Then the pace of each migration's copy
(``volmig.datapath.pacing``) decision by decision, beside the guest's
longest wait since the decision before; ``--plot FILE`` draws it (SVG or
PNG, by the name; needs matplotlib: ``pip install volmig[bench]``).
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402  # nosec B404
import sys  # noqa: E402
import time  # noqa: E402

from benchmarks import guest_pauses  # noqa: E402
from benchmarks import pace_trace  # noqa: E402
from benchmarks import polling  # noqa: E402
from tests import real_guest  # noqa: E402
from volmig import block_storage  # noqa: E402
from volmig import client  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import embedded  # noqa: E402
from volmig import exception  # noqa: E402
from volmig import states  # noqa: E402
from volmig.compute.drivers import guests  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402
from volmig.datapath import copy as copy_mod  # noqa: E402
from volmig.demo import writes as guest_writes  # noqa: E402

WINDOWS = ('outside', 'overlay alone', 'copy alone', 'start', 'copy',
           'complete', 'mirror')
# Seconds of each window that is not a step's own time.
SPELL = 5.0


class Run:
    """One guest on one driver, measured window by window."""

    def __init__(self, driver: str, size_mb: int, pools: dict,
                 cap_mbps: int, drain: int = 1, outside: float = SPELL):
        self.driver = driver
        self.outside = outside
        self.cap_mbps = cap_mbps
        self.pools = pools
        self.drain = drain
        self.admin = volmig_context.get_admin_context()
        self.service = volmig_context.get_service_context()
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.volumes = block_storage.get_adapter()
        self.client = client.MigrationClient()
        self.vol = self.volumes.create_volume(self.admin, size_mb,
                                              pool='pool-a')
        real_guest.fill(self.vol['path'], size_mb)
        # What a drain moves beside the guest's volume.
        for _ in range(drain - 1):
            other = self.volumes.create_volume(self.admin, size_mb,
                                               pool='pool-a')
            real_guest.fill(other['path'], size_mb)
        if driver == 'libvirt':
            embedded.let_through(CONF.state_path)
        self.server, self.console, _ = guest_pauses._boot(
            self.conductor, self.admin, self.vol['id'])
        self.serial = guests.serial(self.vol['id'])
        self.windows: dict[str, list[tuple[float, float]]] = {
            name: [] for name in WINDOWS}

    def window(self, name: str, step) -> None:
        began = time.monotonic()
        step()
        self.windows[name].append((began, time.monotonic()))

    def attachment(self) -> str:
        [bdm] = [bdm for bdm in self.conductor.instance_get(
            self.admin, self.server['uuid'])['block_devices']
            if bdm['volume_id'] == self.vol['id']]
        return bdm['attachment_id']

    def overlay_alone(self) -> None:
        attachment = self.attachment()
        migration = self.client.start(self.service, attachment)
        time.sleep(SPELL)
        self.client.cancel(self.service, attachment)
        self.client.wait_for(self.service, migration['id'],
                             states.CANCELLED)

    def copy_alone(self) -> None:
        scratch = os.path.join(self.pools['pool-b'], 'scratch')
        with open(scratch, 'wb') as handle:
            handle.truncate(os.path.getsize(self.path()))
        try:
            copy_mod.checked_copy(self.path(), scratch, CONF, 'scratch',
                                  self.cap_mbps * 1024 * 1024)
        except exception.CopyMismatch:
            pass  # The guest writes to src all along: only I/O is timed.
        finally:
            os.unlink(scratch)

    def path(self) -> str:
        return self.volumes.get_volume(self.admin, self.vol['id'])['path']

    def migration(self, pool: str) -> None:
        began = time.monotonic()
        if self.drain > 1:
            self.volumes.drain_pool(self.admin, 'pool-a', pool,
                                    max_parallel=self.drain,
                                    max_bandwidth_mbps=self.cap_mbps)
        else:
            self.volumes.migrate_volume(self.admin, self.vol['id'], pool,
                                        self.cap_mbps)
        started = time.monotonic()
        copied = polling.until(
            lambda: self.volumes.get_volume(self.admin, self.vol['id']),
            lambda v: v.get('migration_checksum')
            or v['migration_status'] == 'error', 'the copy',
            interval=0.01)
        checked = time.monotonic()
        if copied['migration_status'] == 'error':
            raise SystemExit('migration failed: %s'
                             % copied['migration_error'])
        self.client.wait_for(self.service, copied['migration_ids'][0],
                             states.COMPLETED)
        ended = time.monotonic()
        self.windows['start'].append((began, started))
        self.windows['copy'].append((started, checked))
        self.windows['complete'].append((checked, ended))
        if self.drain > 1:
            polling.drained(self.volumes, self.admin, 'pool-a',
                            interval=0.05)

    def mirror(self, pool: str) -> None:
        new = self.volumes.create_volume(self.admin, self.vol['size_mb'],
                                         pool=pool)
        old = self.vol
        began = time.monotonic()
        self.conductor.swap_volume(self.admin, self.server['uuid'],
                                   old['id'], new['id'])
        polling.until(
            lambda: self.conductor.instance_get(self.admin,
                                                self.server['uuid']),
            lambda s: s['task_state'] is None and new['id'] in {
                bdm['volume_id'] for bdm in s['block_devices']},
            'the swap', interval=0.01)
        self.windows['mirror'].append((began, time.monotonic()))
        self.vol = new
        self.volumes.delete_volume(self.admin, old['id'])

    def one(self) -> None:
        self.window('outside', lambda: time.sleep(self.outside))
        self.window('overlay alone', self.overlay_alone)
        self.window('copy alone', self.copy_alone)
        time.sleep(1)
        self.migration('pool-b')
        time.sleep(1)
        self.mirror('pool-a')
        if self.drain > 1:
            self.volumes.drain_pool(self.admin, 'pool-b', 'pool-a',
                                    max_parallel=self.drain)
            polling.drained(self.volumes, self.admin, 'pool-b')
        time.sleep(1)

    def report(self) -> dict[str, list[tuple[float, float, float]]]:
        """Each window's (p50, p99, max) per run; checks the data."""
        self.conductor.stop_instance(self.admin, self.server['uuid'])
        polling.until(lambda: self.conductor.instance_get(
            self.admin, self.server['uuid']),
            lambda s: s['vm_state'] == states.VM_STOPPED,
            'the guest to stop')
        self.console.close()
        # The guest's writer names its disk by the serial it booted with.
        acks = guest_writes.acknowledged(self.console.text(), self.serial)
        wrong = guest_writes.mismatches(self.path(), acks)
        if wrong or not acks:
            raise SystemExit('acknowledged blocks missing: %s' % wrong[:3])
        return {name: [guest_writes.spread(self.console.gaps(
            self.serial, began, ended)) for began, ended in spells]
                for name, spells in self.windows.items()}


def pace(measured: Run, volume_log: str, plot: str | None) -> None:
    """The pace of each migration's copy, from volmig-volume's log."""
    trace = pace_trace.decisions(volume_log,
                                 time.time() - time.monotonic())
    if not trace:
        print("  no pace to show: the copies kept to the cap alone")
        return
    acks = measured.console.ack_times(measured.serial)
    windows = [pace_trace.rows(trace, acks, began, ended)
               for began, ended in measured.windows['copy']]
    print("  the copy's pace, decision by decision (seconds into the "
          "copy: MiB/s, probes' delay ms, guest's longest wait ms):")
    for n, window in enumerate(windows, 1):
        print('  run %d: %s' % (n, '  '.join(
            '%.1f:%.0f,%.1f,%.0f' % row for row in window)))
    if plot:
        pace_trace.plot(plot, "%s driver: the copy's pace beside the "
                        "guest's writes" % measured.driver, windows)
        print('  plotted in %s' % plot)


def run(driver: str, runs: int, size_mb: int, pools: dict,
        cap_mbps: int, volume_log: str, plot: str | None,
        drain: int, outside: float) -> None:
    real_guest.register(CONF.qemu.image_dir, interval=0)
    measured = Run(driver, size_mb, pools, cap_mbps, drain, outside)
    time.sleep(3)
    for _ in range(runs):
        measured.one()
    results = measured.report()
    print()
    print('%s driver, %d MiB of data, [storage] copy_io_kb %d, copy cap '
          "%s, pacing %s, %s, %d run(s); gaps between the guest's "
          'acknowledged 4 KiB O_DIRECT+fsync writes, ms:' % (
              driver, size_mb, CONF.storage.copy_io_kb,
              '%d MiB/s' % cap_mbps if cap_mbps else 'none',
              'on' if CONF.storage.copy_pacing else 'off',
              'moved in a drain of %d volumes' % drain if drain > 1
              else 'moved alone', runs))
    print('  %-14s %s' % ('window', '  '.join(
        'run %d p50/p99/max' % n for n in range(1, runs + 1))))
    for name in WINDOWS:
        print('  %-14s %s' % (name, '  '.join(
            '%5.1f/%5.1f/%6.1f' % spell for spell in results[name])))
    print('  median over the runs (p50 / p99 / max, and the window\'s '
          'own seconds):')
    for name in WINDOWS:
        columns = list(zip(*results[name], strict=True))
        print('  %-14s %6.1f %6.1f %7.1f %6.2f s' % (
            name, *(statistics.median(column) for column in columns),
            statistics.median(end - began for began, end
                              in measured.windows[name])))
    whole = [end - began for (began, _), (_, end) in zip(
        measured.windows['start'], measured.windows['complete'],
        strict=True)]
    print('  whole migration %.2f s, legacy mirror %.2f s (medians)' % (
        statistics.median(whole), statistics.median(
            end - began for began, end in measured.windows['mirror'])))
    pace(measured, volume_log, plot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--driver', nargs='+', default=['qemu', 'libvirt'],
                        choices=('qemu', 'libvirt'))
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--size-mb', type=int, default=512,
                        help="The guest's data volume, all of it data.")
    parser.add_argument('--copy-io-kb', type=int, default=0,
                        help='[storage] copy_io_kb of the copies: the '
                        'largest single I/O, 0 for the chunk.')
    parser.add_argument('--max-bandwidth-mbps', type=int, default=0,
                        help="The migrations' and the copy alone's cap, "
                        'MiB/s; 0 for none.')
    parser.add_argument('--pacing', action=argparse.BooleanOptionalAction,
                        default=True,
                        help='[storage] copy_pacing (on, as by default): '
                        'the copies take their rate from their disk, under '
                        'the cap; --no-pacing: the cap alone.')
    parser.add_argument('--drain', type=int, default=1,
                        help="Move the guest's volume in a drain of this "
                        'many volumes at once (1: alone).')
    parser.add_argument('--outside-seconds', type=float, default=SPELL,
                        help='How long the guest is measured with nothing '
                        'migrating, each run: as long as the copy window, '
                        'its longest gap is a fair yardstick for the '
                        "copy's (default: %(default)s).")
    parser.add_argument('--plot', help="Draw the copies' pace into this "
                        'file (.svg or .png); with two drivers, each '
                        "driver's name is put before the suffix.")
    args = parser.parse_args()
    if len(args.driver) > 1:
        # One process per driver: a process parses its configuration once.
        for driver in args.driver:
            root, suffix = os.path.splitext(args.plot or '')
            subprocess.run([sys.executable, '-m', 'benchmarks.guest_stalls',
                            '--driver', driver, '--runs', str(args.runs),
                            '--size-mb', str(args.size_mb),
                            '--copy-io-kb', str(args.copy_io_kb),
                            '--max-bandwidth-mbps',
                            str(args.max_bandwidth_mbps),
                            '--drain', str(args.drain),
                            '--outside-seconds', str(args.outside_seconds),
                            '--pacing' if args.pacing else '--no-pacing',
                            *(['--plot', '%s-%s%s' % (root, driver, suffix)]
                              if args.plot else [])],
                           check=True)
        return
    [driver] = args.driver
    with guest_pauses.driver_cluster(driver, {
            ('qemu', 'export_disks'): False,
            # The pace's decisions are logged at debug level.
            ('DEFAULT', 'debug'): True,
            ('storage', 'copy_pacing'): args.pacing,
            ('storage', 'max_bandwidth_mbps'): 0,
            ('storage', 'copy_io_kb'): args.copy_io_kb}) as (services,
                                                             pools):
        # This process's copy alone too.
        CONF.set_override('copy_io_kb', args.copy_io_kb, 'storage')
        CONF.set_override('copy_pacing', args.pacing, 'storage')
        run(driver, args.runs, args.size_mb, pools,
            args.max_bandwidth_mbps,
            services.processes['volume'].log_path, args.plot, args.drain,
            args.outside_seconds)

if __name__ == '__main__':
    main()

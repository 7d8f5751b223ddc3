"""The pause a real guest lives at start and at complete, on each driver.

    python -m benchmarks.guest_pauses [--driver qemu libvirt] [--size-mb N]

For each driver: separate volmig-conductor, volmig-api, volmig-volume and
volmig-compute processes on a RabbitMQ vhost of their own. volmig-guest
(as ``tools/build-guest-image.sh`` built it) boots with a data volume in
pool-a; its writer acknowledges each 4 KiB block (O_DIRECT + fsync) on the
serial console, and this process stamps each acknowledgement as it comes,
from the qemu driver's console socket or from the log file libvirt writes
the console to. While it writes, volmig-volume migrates the volume live
to pool-b. It prints the boot time, the write rate, and the pause as the
guest lived it: the longest gap between acknowledgements around start
and around complete, against the median gap, beside the pauses the agent
measured (the QMP or libvirt calls that drain I/O). Then the guest stops
cleanly, and every acknowledged block is looked for on pool-b.

The libvirt run needs libvirtd (started here as the tests start it, if
it does not answer).
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402  # nosec B404
import sys  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402

from benchmarks import polling  # noqa: E402
from tests import libvirt_daemon  # noqa: E402
from tests import real_guest  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import block_storage  # noqa: E402
from volmig import client  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import embedded  # noqa: E402
from volmig import states  # noqa: E402
from volmig.compute.drivers import guests  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402
from volmig.demo import writes as guest_writes  # noqa: E402

# What the agent times, per driver: the calls that drain the guest's I/O.
CALLS = {'qemu': ('QMP blockdev-snapshot', 'QMP blockdev-reopen',
                  'job-complete'),
         'libvirt': ('libvirt snapshotCreateXML', 'blockCopy pivot',
                     'blockCommit pivot')}


def _boot(conductor, admin, volume_id: str):
    """A writing guest; returns (server, its console, the boot time)."""
    began = time.monotonic()
    [server] = conductor.build_instances(
        admin, 'guest', [{'volume_id': volume_id, 'boot_index': None}], 1,
        None, image_ref='volmig-guest')
    server = polling.until(
        lambda: conductor.instance_get(admin, server['uuid']),
        lambda s: s['vm_state'] in (states.VM_ACTIVE, states.VM_ERROR),
        'the guest to build')
    if server['vm_state'] == states.VM_ERROR:
        raise SystemExit('the guest failed to build: %s'
                         % server['fault_message'])
    console = guest_writes.ConsoleReader(guest_writes.console_of(
        os.path.join(CONF.state_path, 'compute', 'guests', server['uuid'])))
    console.start()
    console.wait_for('^ACK %s ' % guests.serial(volume_id), timeout=300)
    return server, console, time.monotonic() - began


def run(driver: str, size_mb: int) -> None:
    admin = volmig_context.get_admin_context()
    conductor = conductor_rpcapi.ConductorAPI()
    volumes = block_storage.get_adapter()
    # Writing as fast as it can: the pauses show most under load.
    real_guest.register(CONF.qemu.image_dir, interval=0)
    vol = volumes.create_volume(admin, size_mb, pool='pool-a')
    if driver == 'libvirt':
        embedded.let_through(CONF.state_path)
    server, console, booted = _boot(conductor, admin, vol['id'])
    serial = guests.serial(vol['id'])
    time.sleep(5)

    # migrate_volume returns once start did: the start window.
    start_began = time.monotonic()
    volumes.migrate_volume(admin, vol['id'], 'pool-b', 0)
    start_ended = time.monotonic()
    copied = polling.until(
        lambda: volumes.get_volume(admin, vol['id']),
        lambda v: v.get('migration_checksum')
        or v['migration_status'] == 'error', 'the copy')
    complete_began = time.monotonic()
    current = polling.until(
        lambda: volumes.get_volume(admin, vol['id']),
        lambda v: v['migration_status'] in ('success', 'error'),
        'the switch')
    if current['migration_status'] == 'error' or not copied:
        raise SystemExit('migration failed: %s' % current['migration_error'])
    migrated = client.MigrationClient().wait_for(
        volmig_context.get_service_context(), current['migration_ids'][0],
        states.COMPLETED)
    complete_ended = time.monotonic()
    time.sleep(2)

    # An ACPI power-off: the writer stops, syncs and says DONE.
    conductor.stop_instance(admin, server['uuid'])
    polling.until(lambda: conductor.instance_get(admin, server['uuid']),
                  lambda s: s['vm_state'] == states.VM_STOPPED,
                  'the guest to stop')
    console.close()
    acks = guest_writes.acknowledged(console.text(), serial)
    wrong = guest_writes.mismatches(current['path'], acks)
    times = console.ack_times(serial)
    pauses = migrated['pauses_ms'] or {}
    snapshot, switch, commit = CALLS[driver]
    print()
    print('%s driver: volmig-guest (%s) booted to its first acknowledged '
          'write in %.1f s' % (driver, guests.accelerator(CONF), booted))
    print('acknowledged writes: %d, %.0f/s (4 KiB, O_DIRECT + fsync each)'
          % (len(acks), (len(times) - 1) / (times[-1] - times[0])))
    print('median gap between acknowledgements: %.1f ms'
          % console.median_gap(serial))
    print('longest gap around start:    %.1f ms  (%s %.2f ms)'
          % (console.longest_gap(serial, start_began, start_ended),
             snapshot, pauses.get('start', float('nan'))))
    print('longest gap around complete: %.1f ms  (%s %.2f ms, %s %.2f ms)'
          % (console.longest_gap(serial, complete_began, complete_ended),
             switch, pauses.get('switch', float('nan')), commit,
             pauses.get('complete', float('nan'))))
    print('the guest stopped cleanly: %s' % (
        'yes' if 'volmig-guest: DONE' in console.text() else 'NO'))
    print('every acknowledged block is on pool-b: %s'
          % ('yes' if acks and not wrong else 'NO: %s' % wrong[:3]))


@contextlib.contextmanager
def driver_cluster(driver: str, options: dict):
    """The services on ``driver`` (libvirtd started if need be), with
    ``options``; yields (cluster, pools) as ``qemu_cluster`` does."""
    with fixtures.Fixture() as daemons:
        if driver == 'libvirt':
            reason = libvirt_daemon.unavailable()
            if reason:
                raise SystemExit('libvirt: %s' % reason)
            daemons.useFixture(libvirt_daemon.Libvirtd())
        with cluster.qemu_cluster({
                ('compute', 'driver'): driver,
                # The guest's writer stops on ACPI power-off.
                ('compute', 'shutdown_timeout'): 60,
                ('DEFAULT', 'report_interval'): 2, **options}) as found:
            yield found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--driver', nargs='+', default=['qemu', 'libvirt'],
                        choices=('qemu', 'libvirt'))
    parser.add_argument('--size-mb', type=int, default=256,
                        help='The guest\'s data volume.')
    args = parser.parse_args()
    if len(args.driver) > 1:
        # One process per driver: a process parses its configuration once.
        for driver in args.driver:
            subprocess.run([sys.executable, '-m', 'benchmarks.guest_pauses',
                            '--driver', driver, '--size-mb',
                            str(args.size_mb)], check=True)
        return
    for driver in args.driver:
        with driver_cluster(driver, {('qemu', 'export_disks'):
                                     driver == 'qemu'}):
            run(driver, args.size_mb)


if __name__ == '__main__':
    main()

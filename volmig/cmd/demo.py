"""volmig-demo: a live migration of a volume a running guest writes to.

It runs the embedded default in this process (conductor, volmig-volume,
api and a compute agent with the qemu driver, on ``fake://`` with SQLite),
boots a QEMU guest from a volume in pool-a, keeps writing into it, and
has volmig-volume migrate the volume to pool-b. It prints the progress,
checks the result byte for byte against every write the guest made, and
prints the guest I/O pauses.
"""

import hashlib
import logging
import sys
import time

from oslo_config import cfg

from volmig import client
from volmig import config
from volmig import context as volmig_context
from volmig import embedded
from volmig import states
from volmig.compute.drivers.qemu import guest_io
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.conf import compute as compute_conf
from volmig.volume import file as file_volumes

MIB = 1024 * 1024

cli_opts = [
    cfg.StrOpt('state-dir', required=True,
               help='Directory for the database, pools and guests.'),
    cfg.IntOpt('size-mb', default=256, min=16,
               help='Size of the volume.'),
    cfg.IntOpt('max-bandwidth-mbps', default=64, min=0,
               help='Copy bandwidth cap (MiB/s), so the copy runs long '
                    'enough to watch; 0 for none.'),
    cfg.BoolOpt('verbose', default=False,
                help='Show the services\' INFO logs too.'),
]


def _wait(what, fetch, done, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        time.sleep(0.1)
    raise RuntimeError('timed out waiting for %s' % what)


def run_demo(size_mb: int, bandwidth: int) -> bool:
    admin = volmig_context.get_admin_context()
    user = volmig_context.RequestContext(user_id='demo', project_id='demo',
                                         roles=['member'])
    volumes = file_volumes.FileVolumeAdapter()
    conductor = conductor_rpcapi.ConductorAPI()

    vol = volumes.create_volume(admin, size_mb, name='data', pool='pool-a')
    print('volume %s: %d MiB in pool-a (%s)' % (vol['id'], size_mb,
                                                vol['path']))
    [server] = conductor.build_instances(
        user, 'demo-vm', [{'volume_id': vol['id'], 'boot_index': 0}], 1,
        None)
    server = _wait('the server', lambda: conductor.instance_get(admin,
                                                       server['uuid']),
          lambda s: s['vm_state'] in (states.VM_ACTIVE, states.VM_ERROR))
    if server['vm_state'] == states.VM_ERROR:
        print('server %s failed to build' % server['uuid'])
        return False
    print('server %s is running in QEMU with the volume attached'
          % server['uuid'])

    writer = guest_io.GuestWriter(
        guest_io.nbd_socket(compute_conf.state_path(CONF), server['uuid']),
        vol['id'])
    for number in range(size_mb // 4):
        writer.write(0x10 + number % 200, number * 4 * MIB, MIB)
    load = guest_io.WriteLoad(writer, size_mb * MIB)
    load.start()
    print('the guest wrote %d MiB and keeps writing 64 KiB blocks'
          % (size_mb // 4))

    began = time.monotonic()
    volumes.migrate_volume(admin, vol['id'], 'pool-b', bandwidth)
    print('migrating to pool-b (copy capped at %s MiB/s)'
          % (bandwidth or 'no'))
    last = None
    while True:
        current = volumes.get_volume(admin, vol['id'])
        shown = (current['migration_status'], current['migration_progress'])
        if shown != last:
            print('  %-9s copy %5.1f%%' % shown, flush=True)
            last = shown
        if current['migration_status'] in ('success', 'error'):
            break
        time.sleep(0.25)
    elapsed = time.monotonic() - began
    if current['migration_status'] == 'error':
        load.stop()
        print('migration failed: %s' % current['migration_error'])
        return False
    [migration_id] = current['migration_ids']
    migration = client.MigrationClient().wait_for(
        volmig_context.get_service_context(), migration_id,
        states.COMPLETED)

    time.sleep(0.5)  # a few writes straight into pool-b
    load.stop()
    writer.close()
    if load.error:
        print('a guest write failed: %s' % load.error)
        return False

    expected = writer.expected_image(bytes(size_mb * MIB))
    with open(current['path'], 'rb') as handle:
        actual = handle.read()
    want = hashlib.sha256(expected).hexdigest()
    got = hashlib.sha256(actual).hexdigest()
    print('volume %s is now in %s (%s), migrated in %.1f s'
          % (vol['id'], current['pool'], current['path'], elapsed))
    print('copy verified by volmig-volume: sha256 %s'
          % current['migration_checksum'])
    print('guest made %d writes; expected image sha256 %s'
          % (len(writer.writes), want))
    print('volume in pool-b now:               sha256 %s -> %s'
          % (got, 'MATCH' if got == want else 'MISMATCH'))
    pauses = migration['pauses_ms'] or {}
    print('guest I/O pauses (QMP round trip): start %.2f ms, switch '
          '%.2f ms, complete %.2f ms'
          % (pauses.get('start', 0), pauses.get('switch', 0),
             pauses.get('complete', 0)))
    return got == want


def main() -> None:
    CONF.register_cli_opts(cli_opts)
    config.parse_args(sys.argv[1:])
    if not CONF.verbose:
        logging.getLogger().setLevel(logging.WARNING)
    CONF.set_override('export_disks', True, group='qemu')
    embedded.configure(CONF.state_dir, 'qemu', 'fake://')
    group = embedded.build(computes=1)
    group.start()
    try:
        ok = run_demo(CONF.size_mb, CONF.max_bandwidth_mbps)
    finally:
        group.stop()
    sys.exit(0 if ok else 1)

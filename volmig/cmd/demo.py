"""volmig-demo: a live migration of a volume a running guest writes to.

It runs the embedded default in this process (conductor, volmig-volume,
api and a compute agent with the qemu driver, or with ``--driver
libvirt`` the libvirt driver, on ``fake://`` with SQLite)
and boots ``volmig-guest``, a real Linux guest, with a data volume in
pool-a. The writer inside the guest keeps writing sequence-numbered
blocks, each acknowledged on the serial console once it is on the disk,
while volmig-volume migrates the volume live to pool-b. Then the guest is
shut down cleanly, and every block it acknowledged is checked on pool-b.
It prints the pauses as the agent measured them and as the guest lived
them.
"""

import logging
import os
import sys
import time

from oslo_config import cfg

from volmig import client
from volmig import config
from volmig import context as volmig_context
from volmig import embedded
from volmig import guest_writes
from volmig import states
from volmig.compute.drivers import guests
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.conf import compute as compute_conf
from volmig.volume_service import rpcapi as storage_rpcapi

cli_opts = [
    cfg.StrOpt('state-dir', required=True,
               help='Directory for the database, pools and guests.'),
    cfg.StrOpt('driver', default='qemu', choices=['qemu', 'libvirt'],
               help='Compute driver: QEMU processes of the agent\'s own, '
                    'or libvirt domains (libvirtd must be running).'),
    cfg.IntOpt('size-mb', default=256, min=16,
               help='Size of the volume.'),
    cfg.IntOpt('max-bandwidth-mbps', default=32, min=0,
               help='Copy bandwidth cap (MiB/s), so the copy runs long '
                    'enough to watch; 0 for none.'),
    cfg.StrOpt('guest-image', default='build/guest-image',
               help='Where tools/build-guest-image.sh put volmig-guest.'),
    cfg.BoolOpt('verbose', default=False,
                help='Show the services\' INFO logs too.'),
]


def _wait(what, fetch, done, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        time.sleep(0.1)
    raise RuntimeError('timed out waiting for %s' % what)


def _follow(volumes, admin, volume_id):
    """Print the migration's progress until it ends; returns the volume
    and when its copy was seen verified (the switch follows)."""
    last, verified = None, None
    while True:
        current = volumes.get_volume(admin, volume_id)
        if verified is None and current['migration_checksum']:
            verified = time.monotonic()
        shown = (current['migration_status'], current['migration_progress'])
        if shown != last:
            print('  %-9s copy %5.1f%%' % shown, flush=True)
            last = shown
        if current['migration_status'] in ('success', 'error'):
            return current, verified or time.monotonic()
        time.sleep(0.05)


def run_demo(size_mb: int, bandwidth: int) -> bool:
    admin = volmig_context.get_admin_context()
    user = volmig_context.RequestContext(user_id='demo', project_id='demo',
                                         roles=['member'])
    volumes = storage_rpcapi.StorageAPI()
    conductor = conductor_rpcapi.ConductorAPI()

    vol = volumes.create_volume(admin, size_mb, name='data', pool='pool-a')
    print('volume %s: %d MiB in pool-a (%s)' % (vol['id'], size_mb,
                                                vol['path']))
    began = time.monotonic()
    [server] = conductor.build_instances(
        user, 'demo-vm', [{'volume_id': vol['id'], 'boot_index': None}], 1,
        None, image_ref=embedded.GUEST_IMAGE)
    server = _wait('the server', lambda: conductor.instance_get(
        admin, server['uuid']), lambda s: s['vm_state'] in (
            states.VM_ACTIVE, states.VM_ERROR))
    if server['vm_state'] == states.VM_ERROR:
        print('server %s failed to build: %s' % (server['uuid'],
                                                 server['fault_message']))
        return False
    guest_dir = os.path.join(compute_conf.state_path(CONF), 'guests',
                             server['uuid'])
    console = guest_writes.ConsoleReader(guest_writes.console_of(guest_dir))
    console.start()
    serial = guests.serial(vol['id'])
    console.wait_for('^ACK %s ' % serial, timeout=120)
    print('server %s booted %s in %.1f s; its writer acknowledges '
          'blocks on the console' % (server['uuid'], embedded.GUEST_IMAGE,
                                     time.monotonic() - began))
    time.sleep(2)

    began = time.monotonic()
    volumes.migrate_volume(admin, vol['id'], 'pool-b', bandwidth)
    started = time.monotonic()
    print('migrating to pool-b (copy capped at %s MiB/s)'
          % (bandwidth or 'no'))
    current, verified = _follow(volumes, admin, vol['id'])
    if current['migration_status'] == 'error':
        print('migration failed: %s' % current['migration_error'])
        return False
    [migration_id] = current['migration_ids']
    migration = client.MigrationClient().wait_for(
        volmig_context.get_service_context(), migration_id,
        states.COMPLETED)
    ended = time.monotonic()
    time.sleep(2)  # writes straight into pool-b

    conductor.stop_instance(user, server['uuid'])
    _wait('the guest to shut down', lambda: conductor.instance_get(
        admin, server['uuid']), lambda s: s['vm_state'] == states.VM_STOPPED)
    console.close()
    with open(os.path.join(guest_dir, 'console.log')) as log:
        acks = guest_writes.acknowledged(log.read(), serial)
    wrong = guest_writes.mismatches(current['path'], acks)
    print('volume %s is now in %s (%s), migrated in %.1f s'
          % (vol['id'], current['pool'], current['path'], ended - began))
    print('copy verified by volmig-volume: sha256 %s'
          % current['migration_checksum'])
    print('the guest acknowledged %d writes (up to seq %d) and shut down '
          'cleanly' % (len(acks), max(acks, default=0)))
    print('every acknowledged block is on pool-b: %s'
          % ('YES' if not wrong else 'NO, %d slots differ: %s'
             % (len(wrong), '; '.join(wrong[:3]))))
    pauses = migration['pauses_ms'] or {}
    print('guest I/O pauses (the %s call): start %.2f ms, switch '
          '%.2f ms, complete %.2f ms'
          % ('QMP' if CONF.driver == 'qemu' else 'libvirt',
             pauses.get('start', 0), pauses.get('switch', 0),
             pauses.get('complete', 0)))
    print('as the guest lived them, the gaps between its acknowledged '
          'writes (p99 / longest, ms):')
    for what, window in (('before the migration', (began - 2, began)),
                         ('around the start', (began, started)),
                         ('during the copy', (started, verified)),
                         ('around the switch', (verified, ended))):
        _, p99, longest = guest_writes.spread(console.gaps(serial, *window))
        print('  %-21s %6.1f / %6.1f' % (what, p99, longest))
    return bool(acks) and not wrong


def _libvirt_unreachable() -> str | None:
    """Why the libvirt driver cannot run, said before any service starts."""
    try:
        import libvirt
    except ImportError:
        return ("libvirt-python is not installed: pip install "
                "'volmig[libvirt]'")
    libvirt.registerErrorHandler(lambda *_: None, None)
    try:
        libvirt.open(CONF.libvirt.uri).close()
    except libvirt.libvirtError as exc:
        return ('libvirtd does not answer on %s (%s): start it '
                '(systemctl start libvirtd, or virtlogd -d and libvirtd -d)'
                % (CONF.libvirt.uri, exc.get_error_message()))
    return None


def main() -> None:
    CONF.register_cli_opts(cli_opts)
    config.parse_args(sys.argv[1:])
    if not CONF.verbose:
        logging.getLogger().setLevel(logging.WARNING)
    embedded.configure(CONF.state_dir, CONF.driver, 'fake://')
    if embedded.register_guest_image(CONF.guest_image) is None:
        print('volmig-guest is not built: run tools/build-guest-image.sh',
              file=sys.stderr)
        sys.exit(1)
    if CONF.driver == 'libvirt':
        reason = _libvirt_unreachable()
        if reason:
            print(reason, file=sys.stderr)
            sys.exit(1)
    group = embedded.build(computes=1)
    group.start()
    if CONF.driver == 'libvirt':
        # The pools and the guests' directories exist now.
        embedded.let_through(CONF.state_dir)
    try:
        ok = run_demo(CONF.size_mb, CONF.max_bandwidth_mbps)
    finally:
        group.stop()
    sys.exit(0 if ok else 1)

"""The demo's live migration under a writing guest, on the services that
``volmig.cmd.demo`` starts in its process: boot volmig-guest with a data
volume in pool-a, migrate the volume to pool-b while the guest writes,
stop the guest cleanly, and check every block it acknowledged on pool-b.
"""

import os
import time

from volmig import client
from volmig import context as volmig_context
from volmig import embedded
from volmig import states
from volmig.compute.drivers import guests
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF
from volmig.conf import compute as compute_conf
from volmig.demo import writes
from volmig.volume_service import rpcapi as storage_rpcapi


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


def run(size_mb: int, bandwidth: int) -> bool:
    """Whether every acknowledged write is on pool-b."""
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
    console = writes.ConsoleReader(writes.console_of(guest_dir))
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
        acks = writes.acknowledged(log.read(), serial)
    wrong = writes.mismatches(current['path'], acks)
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
        _, p99, longest = writes.spread(console.gaps(serial, *window))
        print('  %-21s %6.1f / %6.1f' % (what, p99, longest))
    return bool(acks) and not wrong

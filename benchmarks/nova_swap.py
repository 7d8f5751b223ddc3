"""Nova's own swap of a running server's volume, beside volmig's live path
on libvirt, on the same machine and the same writing guest.

    python -m benchmarks.nova_swap [--runs 3] [--size-mb 512]

Nova's side: Keystone, Cinder (two NFS backends) and Nova 34 (libvirt
under TCG) as the tests run them. A server boots volmig-guest from a
Cinder volume, and its writer acknowledges each 4 KiB block (O_DIRECT +
fsync) on the serial console as fast as it can, on a data volume that
holds ``--size-mb`` of random data. Each run asks Cinder to migrate the
data volume to the other backend: Cinder's migration, which calls Nova's
swap (a libvirt block copy, then a pivot). It records the gaps between the
guest's acknowledgements from the request to the migration's end, and
that time; ``outside`` is the guest's own pace with nothing moving. The
bytes are checked against every acknowledged write after a clean stop.

volmig's side: ``benchmarks.guest_stalls --driver libvirt`` with the same
writer and size, in the same command (its ``start``, ``copy`` and
``complete`` windows are volmig's live path, and its ``mirror`` is the
legacy swap that Nova's resembles).
"""

import argparse
import os
import statistics
import subprocess  # nosec B404
import sys
import time

from tests import cinder_deployment
from tests import nova_deployment
from tests import openstack
from tests import real_guest
from volmig.demo import writes as guest_writes

SPELL = 5.0


def _volume(cinder, session, backend: str) -> dict:
    """A 1 GiB volume of ``session``'s user on ``backend``."""
    answer = cinder.request('POST', '/volumes', session, json={
        'volume': {'size': 1, 'volume_type': 'swap'}})
    answer.raise_for_status()
    volume_id = answer.json()['volume']['id']
    volume = openstack.wait_for('volume', lambda: (
        lambda v: v if v['status'] == 'available' else None)(
            cinder.volume(volume_id)))
    if volume['os-vol-host-attr:host'] != cinder.pool_of(backend):
        volume = _migrate(cinder, volume_id, cinder.pool_of(backend))
    return volume


def _migrate(cinder, volume_id: str, pool: str) -> dict:
    cinder.request('POST', '/volumes/%s/action' % volume_id, json={
        'os-migrate_volume': {'host': pool}}).raise_for_status()
    volume = openstack.wait_for('the migration', lambda: (
        lambda v: v if v['migration_status'] in ('success', 'error')
        else None)(cinder.volume(volume_id)), timeout=600)
    if volume['os-vol-host-attr:host'] != pool:
        raise SystemExit('migration failed: %s' % cinder.errors())
    return volume


def measure(deployment, runs: int, size_mb: int) -> None:
    keystone = deployment.useFixture(openstack.Keystone())
    keystone.user('alice', keystone.project('tenant-a'), ('member',))
    alice = keystone.session('alice', openstack.SERVICE_PASSWORD,
                             'tenant-a')
    port = openstack.free_port()
    cinder = deployment.useFixture(cinder_deployment.Cinder(
        keystone, 'http://127.0.0.1:%d/v2.1' % port, own_fs=True))
    nova = deployment.useFixture(nova_deployment.Nova(keystone, cinder,
                                                      port, 'compute-1'))
    root = _volume(cinder, alice, 'nfs-a')
    # One writer, on the data volume, as guest_stalls' guest has.
    real_guest.boot_volume(cinder.volume_file(root), interval=0,
                           writes_itself=False)
    cinder.request('POST', '/volumes/%s/action' % root['id'], json={
        'os-set_bootable': {'bootable': True}}).raise_for_status()
    data = _volume(cinder, alice, 'nfs-a')
    real_guest.fill(cinder.volume_file(data), size_mb)
    server_id = nova.boot(root['id'], alice)['id']
    nova.request('POST', '/servers/%s/os-volume_attachments' % server_id,
                 alice, json={'volumeAttachment': {
                     'volumeId': data['id']}}).raise_for_status()
    serial = data['id'][:20]
    console = guest_writes.ConsoleReader(os.path.join(
        nova.instances, server_id, 'console.log'))
    console.start()
    console.wait_for('ACK %s ' % serial, timeout=120)
    began = time.monotonic()
    time.sleep(SPELL)
    windows = {'outside': [(began, time.monotonic())], 'Nova swap': []}
    pools = [cinder.pool_of('nfs-b'), cinder.pool_of('nfs-a')]
    for run in range(runs):
        time.sleep(2)
        began = time.monotonic()
        _migrate(cinder, data['id'], pools[run % 2])
        windows['Nova swap'].append((began, time.monotonic()))
    time.sleep(2)
    nova.request('POST', '/servers/%s/action' % server_id, alice,
                 json={'os-stop': None}).raise_for_status()
    nova.wait_for_status(server_id, 'SHUTOFF')
    console.close()
    acks = guest_writes.acknowledged(nova.console_log(server_id), serial)
    wrong = guest_writes.mismatches(
        cinder.volume_file(cinder.volume(data['id'])), acks)
    if wrong or not acks:
        raise SystemExit('acknowledged blocks missing: %s' % wrong[:3])
    print()
    print("Nova 34's swap (Cinder's migration of the volume of a running "
          'server), libvirt, %d MiB of data, %d run(s); gaps between the '
          "guest's acknowledged 4 KiB O_DIRECT+fsync writes, ms; %d writes "
          'checked:' % (size_mb, runs, len(acks)))
    for name, spells in windows.items():
        for began, ended in spells:
            print('  %-10s %5.1f / %5.1f / %6.1f  %6.2f s' % (
                name, *guest_writes.spread(console.gaps(serial, began,
                                                        ended)),
                ended - began))
    print('  Nova swap median: %.2f s from request to end' % (
        statistics.median(e - b for b, e in windows['Nova swap'])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--size-mb', type=int, default=512,
                        help="The data volume's random data, MiB (of 1 GiB).")
    parser.add_argument('--nova-only', action='store_true',
                        help="Skip volmig's side.")
    args = parser.parse_args()
    deployment = openstack.Processes()
    deployment.setUp()
    try:
        measure(deployment, args.runs, args.size_mb)
    finally:
        deployment.cleanUp()
    if not args.nova_only:
        subprocess.run([sys.executable, '-m', 'benchmarks.guest_stalls',
                        '--driver', 'libvirt', '--runs', str(args.runs),
                        '--size-mb', str(args.size_mb)], check=True)


if __name__ == '__main__':
    main()

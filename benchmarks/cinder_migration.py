"""Cinder's migration of a volume: volmig's two live paths against
Cinder's own copy of the same volume detached.

Real Keystone and Cinder (``tests.openstack``, ``tests.cinder_deployment``)
and a volmig deployment (conductor, api behind Keystone, one qemu agent)
on this machine. The same volume size and data are moved to another
backend of Cinder's NFS driver, on the same disk, by ``os-retype
--migration-policy on-demand``:

- detached (nfs-a to nfs-b): Cinder copies by itself (``dd`` through
  os-brick on the cinder-volume host);
- attached to a running volmig-guest whose writer keeps writing:

  - an unmodified Cinder (nfs-a to nfs-b) asks the compute API (volmig)
    to swap, and volmig carries it out live, its agent copying;
  - cinder-volume with volmig's manager (nfs-c to nfs-d) starts through
    volmig, copies as it copies a detached volume, and completes through
    volmig.

As a user sees it: the volumes are a tenant's (a member of her own
project), made, attached and retyped with her token, full of random
data, and each retype starts from a cold cache (the page cache dropped:
run as root). Each time is from the retype request to Cinder's
``migration_status: success``; the attached runs also check every
acknowledged write on the new backend, and are compared with Cinder's
move of a detached volume on an idle machine. Each kind runs once
untimed first, as the services of a cloud are past their first calls.
Each attached run also times a detached volume's move while its guest
writes, the baseline under the same load. Last, the copy's own
floor: Cinder's ``dd`` against volmig's copy alone and its checked copy
(dst read back from the disk behind the copy), each from a cold cache.
Beside each attached run, the guest's gaps between acknowledged writes
(p50, p99, longest) during the retype and in a quiet spell before it.
Run as root (bind mounts), after ``tools/bootstrap.sh``::

    .venv/bin/python -m benchmarks.cinder_migration [--size-gb 1] \\
        [--runs 3] [--logs DIR]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess  # nosec: dd, as Cinder runs it
import time
import typing

import fixtures
from oslo_config import cfg
import requests

from tests import cinder_deployment
from tests import openstack
from tests import real_guest
from tests.integration import cluster
from volmig import config
from volmig.compute.drivers import guests
from volmig.conf import storage
from volmig.datapath import copy as copy_mod
from volmig.db import api as db_api
from volmig.db import schema
from volmig.demo import writes as guest_writes

# volmig's copy chunk ([storage] copy_chunk_kb's default).
CHUNK = 4096 * 1024
# Seconds of the guest's writes measured before each retype, with no
# migration: its own pace.
QUIET = 5.0


class Deployment(fixtures.Fixture):
    """Keystone, Cinder, and volmig with ``[volume] backend = cinder``."""

    def _setUp(self):
        self.keystone = self.useFixture(openstack.Keystone())
        self.keystone.service_user('volmig')
        # The tenant whose volumes move, a member of her project.
        self.keystone.user('alice', self.keystone.project('tenant-a'),
                           ('member',))
        self.tenant = self.keystone.session(
            'alice', openstack.SERVICE_PASSWORD, 'tenant-a')
        port = openstack.free_port()
        self.endpoint = 'http://127.0.0.1:%d/v2.1' % port
        self.cinder = self.useFixture(cinder_deployment.Cinder(
            self.keystone, self.endpoint, small_share=False))
        self.dir = self.useFixture(fixtures.TempDir()).path
        vhost = self.useFixture(cluster.VhostFixture())
        config.parse_args([], default_config_files=[], setup_logging=False)
        # The hosts' keys are registered in the database as they are made.
        db_url = 'sqlite:///%s/volmig.sqlite' % self.dir
        db_api.configure(db_url)
        schema.upgrade()
        cluster.master_key(self.dir)
        self.cinder.start_volmig_volume(vhost.url)
        images = os.path.join(self.dir, 'images')
        real_guest.register(images)
        options = {('api', 'listen'): '127.0.0.1', ('api', 'port'): port,
                   ('DEFAULT', 'report_interval'): 2,
                   ('compute', 'driver'): 'qemu',
                   ('compute', 'stop_guests_on_exit'): True,
                   ('compute', 'shutdown_timeout'): 5,
                   ('qemu', 'image_dir'): images}
        options.update(self.cinder.volmig_options())
        options.update(self.keystone.authtoken_options())
        self.guests = os.path.join(self.dir, 'compute', 'guests')
        self.useFixture(cluster.Cluster(self.dir, vhost.url, db_url,
                                        ['compute-1'], options=options))
        self.token = self.keystone.admin.get_token()
        openstack.wait_for('the compute agent', lambda: any(
            service['state'] == 'up' for service in self.rest(
                'GET', '/os-services?binary=volmig-compute')['services']),
            timeout=120)

    def rest(self, method: str, path: str, body=None,
             token: str | None = None) -> dict:
        """volmig's compute API, as the admin unless ``token`` is given."""
        answer = requests.request(
            method, self.endpoint + path, json=body, timeout=60,
            headers={'X-Auth-Token': token or self.token,
                     'OpenStack-API-Version': 'compute 2.61'})
        answer.raise_for_status()
        return answer.json() if answer.content else {}

    def filled_volume(self, size_gb: int, volume_type: str) -> str:
        """A volume of the tenant's, made by her in Cinder."""
        answer = self.cinder.request('POST', '/volumes', self.tenant, json={
            'volume': {'size': size_gb, 'volume_type': volume_type}})
        answer.raise_for_status()
        volume_id = answer.json()['volume']['id']
        openstack.wait_for('the volume', lambda: self.cinder.volume(
            volume_id)['status'] == 'available')
        real_guest.fill(self.cinder.volume_file(
            self.cinder.volume(volume_id)), size_gb * 1024)
        return volume_id

    def retype(self, volume_id: str, new_type: str) -> float:
        """Seconds from the tenant's request, from a cold cache, to
        Cinder's success."""
        drop_caches()
        began = time.monotonic()
        answer = self.cinder.request(
            'POST', '/volumes/%s/action' % volume_id, self.tenant, json={
                'os-retype': {'new_type': new_type,
                              'migration_policy': 'on-demand'}})
        answer.raise_for_status()
        volume = openstack.wait_for(
            'the migration', lambda: (lambda v: v if v.get(
                'migration_status') in ('success', 'error') else None)(
                    self.cinder.volume(volume_id)), timeout=1800)
        if volume['migration_status'] != 'success':
            raise SystemExit('the migration failed:\n%s'
                             % self.cinder.errors())
        return time.monotonic() - began

    def discard(self, *volume_ids: str) -> None:
        """Delete volumes: Cinder's quota allows a project ten."""
        for volume_id in volume_ids:
            self.cinder.request('DELETE', '/volumes/%s' % volume_id,
                                self.tenant).raise_for_status()

    def boot(self, volume_id: str) -> str:
        server = self.rest('POST', '/servers', {'server': {
            'name': 'bench', 'imageRef': 'volmig-guest',
            'block_device_mapping_v2': [{
                'uuid': volume_id, 'source_type': 'volume',
                'destination_type': 'volume', 'boot_index': None}]}},
            token=self.tenant.get_token())
        server_id = server['server']['id']
        openstack.wait_for('the guest', lambda: self.rest(
            'GET', '/servers/%s' % server_id)['server']['status']
            == 'ACTIVE', timeout=300)
        return server_id

    def acks(self, server_id: str, volume_id: str) -> list[int]:
        with open(os.path.join(self.guests, server_id,
                               'console.log')) as log:
            return guest_writes.acknowledged(log.read(),
                                             guests.serial(volume_id))


    def move_steps(self) -> list[tuple[str, str]]:
        """(step, seconds) of the move, from the conductor's log."""
        with open(os.path.join(self.dir, 'conductor.log')) as log:
            return re.findall(r'Volume move \S+: step (\w+) took ([\d.]+) s',
                              log.read())

    def manager_steps(self) -> list[tuple[str, str]]:
        """(step, seconds) of the move, from volmig's manager's log in
        cinder-volume."""
        with open(os.path.join(self.cinder.dir,
                               'volmig-manager.log')) as log:
            return re.findall(r'Attached volume \S+: step (\w+) took '
                              r'([\d.]+) s', log.read())


class Attached(typing.NamedTuple):
    """One retype of a writing guest's volume."""
    # Seconds of a detached volume's retype under the same guest.
    detached: float
    # Seconds of the guest's volume's retype.
    seconds: float
    # Writes acknowledged during it, and those not on the new volume.
    written: int
    lost: int
    # The gaps between the guest's acknowledgements (p50, p99, longest,
    # ms): in a quiet spell before, and during the retype.
    quiet: tuple[float, float, float]
    moving: tuple[float, float, float]


def attached(deployment: Deployment, size_gb: int, old_type: str,
             new_type: str) -> Attached:
    """A retype under a writing guest. On this 2-core machine the
    guest's QEMU (TCG) takes a core, which slows Cinder's copy too: the
    detached volume is moved while it runs, for a baseline under the same
    load."""
    volume_id = deployment.filled_volume(size_gb, old_type)
    detached_id = deployment.filled_volume(size_gb, old_type)
    server_id = deployment.boot(volume_id)
    serial = guests.serial(volume_id)
    console = guest_writes.ConsoleReader(guest_writes.console_of(
        os.path.join(deployment.guests, server_id)))
    console.start()
    try:
        openstack.wait_for('the writer', lambda: len(deployment.acks(
            server_id, volume_id)) >= 20, timeout=300)
        detached = deployment.retype(detached_id, new_type)
        began = time.monotonic()
        time.sleep(QUIET)
        quiet = guest_writes.spread(console.gaps(serial, began,
                                                 time.monotonic()))
        before = len(deployment.acks(server_id, volume_id))
        seconds = deployment.retype(volume_id, new_type)
        ended = time.monotonic()
        moving = guest_writes.spread(console.gaps(serial, ended - seconds,
                                                  ended))
        written = len(deployment.acks(server_id, volume_id)) - before
    finally:
        console.close()
    # Cinder's success may come before volmig's commit into the new
    # volume ends; the server takes no other action until then.
    openstack.wait_for('the commit', lambda: deployment.rest(
        'GET', '/servers/%s' % server_id)['server'][
            'OS-EXT-STS:task_state'] is None, timeout=300)
    deployment.rest('POST', '/servers/%s/action' % server_id,
                    {'os-stop': None})
    openstack.wait_for('the guest to stop', lambda: deployment.rest(
        'GET', '/servers/%s' % server_id)['server']['status']
        == 'SHUTOFF', timeout=300)
    new_file = deployment.cinder.volume_file(
        deployment.cinder.volume(volume_id))
    lost = guest_writes.mismatches(new_file, deployment.acks(
        server_id, volume_id))
    deployment.rest('DELETE', '/servers/%s' % server_id)
    openstack.wait_for('the volume to be detached', lambda: deployment.cinder.
                       volume(volume_id)['status'] == 'available')
    deployment.discard(volume_id, detached_id)
    return Attached(detached, seconds, written, len(lost), quiet, moving)


def drop_caches() -> None:
    """What a retype reads comes from the disk, as it would on a host
    that did not just write it."""
    os.sync()
    with open('/proc/sys/vm/drop_caches', 'w') as caches:
        caches.write('3\n')


def copy_floor(directory: str, size_gb: int) -> dict[str, float]:
    """Seconds of each part of a copy of one volume's file, idle, on the
    file system of Cinder's shares: Cinder's ``dd`` (as
    ``volume_utils.copy_volume`` runs it), volmig's copy (src hashed as
    read), and the read-back from the disk that verifies it. Last, a
    copy and a read-back at once: whether reading each chunk back while
    the next ones are copied would save time on this disk, or whether
    the two share its bandwidth and take their sum anyway.

    src comes from the disk each time, as it does in a migration."""
    size = size_gb * 1024 ** 3
    paths = [os.path.join(directory, 'floor-' + name)
             for name in ('src', 'dd', 'volmig', 'again')]
    for path in paths:
        with open(path, 'wb') as handle:
            handle.truncate(size)
    src, by_dd, by_volmig, again = paths
    real_guest.fill(src, size_gb * 1024)
    times = {}

    def timed(name, function, *args, **kwargs):
        fd = os.open(src, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        began = time.monotonic()
        function(*args, **kwargs)
        times[name] = time.monotonic() - began

    try:
        timed('Cinder\'s dd', subprocess.run, [  # nosec
            'dd', 'if=' + src, 'of=' + by_dd, 'bs=1M', 'count=%d' % size,
            'iflag=count_bytes,direct', 'oflag=direct'], check=True,
            capture_output=True)
        timed('volmig\'s copy alone', copy_mod.copy, src, by_volmig, CHUNK)
        # [storage] as shipped: the copy that migrations run.
        conf = cfg.ConfigOpts()
        storage.register_opts(conf)
        conf([])
        timed('its checked copy', copy_mod.checked_copy, src, again, conf,
              'floor')
    finally:
        for path in paths:
            os.unlink(path)
    return times


def medians(spreads: list[tuple[float, float, float]]) -> str:
    """p50/p99/longest, each the median over the runs, in ms."""
    return '/'.join('%.0f' % statistics.median(column)
                    for column in zip(*spreads, strict=True))


def keep_logs(target: str, *directories: str) -> None:
    os.makedirs(target, exist_ok=True)
    for directory in directories:
        for name in os.listdir(directory):
            if name.endswith('.log'):
                shutil.copy(os.path.join(directory, name), target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--size-gb', type=int, default=1)
    parser.add_argument('--logs', metavar='DIR',
                        help='keep the logs of volmig and Cinder there')
    parser.add_argument('--runs', type=int, default=3,
                        help='migrations of each kind; medians are printed')
    args = parser.parse_args()
    paths = [('unmodified Cinder, volmig\'s compute API', 'nfs-a', 'nfs-b',
              Deployment.move_steps),
             ('volmig\'s manager in cinder-volume', 'nfs-c', 'nfs-d',
              Deployment.manager_steps)]
    results = []
    with Deployment() as deployment:
        if args.logs:
            deployment.addCleanup(keep_logs, args.logs, deployment.dir,
                                  deployment.cinder.dir)
        floor = copy_floor(deployment.cinder.exports['nfs-a'], args.size_gb)
        # One of each first, untimed: what the services pay once in a
        # cloud's life (a token, a negotiated version, a share mounted on
        # the compute host), not per retype.
        volume_id = deployment.filled_volume(args.size_gb, 'nfs-a')
        deployment.retype(volume_id, 'nfs-b')
        deployment.discard(volume_id)
        idle = []
        for _ in range(args.runs):
            volume_id = deployment.filled_volume(args.size_gb, 'nfs-a')
            idle.append(deployment.retype(volume_id, 'nfs-b'))
            deployment.discard(volume_id)
        for name, old, new, logged in paths:
            attached(deployment, args.size_gb, old, new)
            warmed = len(logged(deployment))
            runs = [attached(deployment, args.size_gb, old, new)
                    for _ in range(args.runs)]
            results.append((name, runs, logged(deployment)[warmed:]))
    print('Cinder migration of a tenant\'s %d GiB volume (random data, '
          'cold cache) to another backend, os-retype on-demand by her; %d '
          'runs of each, medians' % (args.size_gb, args.runs))
    print('  %-55s %6.1f s  (runs: %s)' % (
        'detached, Cinder\'s own copy, idle machine:',
        statistics.median(idle), ', '.join('%.1f' % t for t in idle)))
    for name, runs, steps in results:
        print('  %s:' % name)
        for run in runs:
            print('    attached %5.1f s: %.2fx the idle detached move; a '
                  'detached volume meanwhile %5.1f s; %d writes '
                  'acknowledged meanwhile, %d missing on the new volume; '
                  'the guest\'s gaps %s ms, quiet before %s'
                  % (run.seconds, run.seconds / statistics.median(idle),
                     run.detached, run.written, run.lost,
                     '/'.join('%.0f' % v for v in run.moving),
                     '/'.join('%.0f' % v for v in run.quiet)))
        print('    median: attached %.1f s, %.2fx the idle detached move '
              '(what a user sees), %.2fx the detached move under the same '
              'load; the guest\'s gaps (p50/p99/longest, ms) %s during '
              'the retype, %s quiet' % (
                  statistics.median(run.seconds for run in runs),
                  statistics.median(run.seconds for run in runs)
                  / statistics.median(idle),
                  statistics.median(run.seconds / run.detached
                                    for run in runs),
                  medians([run.moving for run in runs]),
                  medians([run.quiet for run in runs])))
        by_step: dict[str, list[float]] = {}
        for step, seconds in steps:
            by_step.setdefault(step, []).append(float(seconds))
        print('    volmig\'s steps, medians: %s' % ', '.join(
            '%s %.2f s' % (step, statistics.median(times))
            for step, times in by_step.items()))
    print('  the copy alone, idle: %s' % ', '.join(
        '%s %.1f s' % item for item in floor.items()))
    # The compute API's path copies with volmig's check from the disk
    # where Cinder's own copy runs dd and reads nothing back: with every
    # other step free, it takes the detached migration with dd swapped
    # for volmig's checked copy (each at its idle time: an estimate, as
    # the load slows each of them).
    loaded = statistics.median(run.detached for run in results[0][1])
    bound = (loaded - floor['Cinder\'s dd'] + floor['its checked copy'])
    print('  the compute API\'s path, estimated floor: %.2fx (the detached '
          'migration under load, %.1f s, its dd, %.1f s, swapped for '
          'volmig\'s checked copy, %.1f s, all else free)'
          % (bound / loaded, loaded, floor['Cinder\'s dd'],
             floor['its checked copy']))

if __name__ == '__main__':
    main()

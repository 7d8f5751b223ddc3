"""The base of the tests on real Linux guests (volmig-guest) on the qemu
driver: two agents, volmig-volume, and requests through the REST API of a
volmig-api process. Every guest runs the in-guest writer: sequence-numbered
blocks, each acknowledged on the serial console once it is on the disk.
"""

import hashlib
import os
import signal

import requests

from tests import real_guest
from tests.integration import base
from volmig import states
from volmig.compute.drivers import guests
from volmig.demo import writes as guest_writes

# A deadline for a hang, not a measure: on a CI machine 2.7 times slower
# than usual, four guests booting beside another test worker's guests
# took over 180 s to acknowledge their first writes.
BOOT_TIMEOUT = 300


class RealGuestTestCase(base.ProcessTestCase):
    COMPUTES = 2
    VOLUME_SERVICE = True
    # compute-2 gives guests too little time to release a disk (PCIe
    # hot-unplug makes Linux wait 5 s): its detaches fail. It has no
    # periodic power sync to speak of: only QMP events tell it.
    COMPUTE_OPTIONS = {'compute-2': {
        ('qemu', 'detach_timeout'): 1,
        ('compute', 'sync_power_state_interval'): 3600}}

    def options(self):
        return {('compute', 'driver'): 'qemu',
                # One directory of guests per agent.
                ('compute', 'state_path'): os.path.join(self.state_path,
                                                        '$host'),
                ('compute', 'sync_power_state_interval'): 1,
                ('qemu', 'image_dir'): os.path.join(self.state_path,
                                                    'images'),
                ('volume', 'backend'): 'file',
                ('storage', 'pools'): self.pools(),
                ('storage', 'max_bandwidth_mbps'): 16,
                ('conductor', 'migration_stall_timeout'): 30}

    def setUp(self):
        # {server id: its directory on its host}: see guest_dir.
        self._guest_dirs: dict[str, str] = {}
        super().setUp()
        real_guest.register(os.path.join(self.state_path, 'images'))
        self.addCleanup(self.kill_guests)

    def kill_guests(self):
        for host in self.hosts:
            guests = os.path.join(self.state_path, host, 'guests')
            for uuid in os.listdir(guests) if os.path.isdir(guests) else []:
                try:
                    with open(os.path.join(guests, uuid, 'qemu.pid')) as pid:
                        os.kill(int(pid.read()), signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError, ValueError):
                    pass

    # REST.

    def rest(self, method, path, body=None, token='admin:demo'):
        response = requests.request(
            method, self.endpoint + path, json=body, timeout=60,
            headers={'X-Auth-Token': token,
                     'OpenStack-API-Version': 'compute 2.61'})
        self.assertNotIn(response.status_code, range(500, 600),
                         response.text)
        return response.status_code, (response.json() if response.content
                                      else None)

    def volume(self, multiattach=False, size_mb=16):
        code, body = self.rest('POST', '/os-volumes', {'volume': {
            'size_mb': size_mb, 'multiattach': multiattach}})
        self.assertEqual(200, code, body)
        return body['volume']

    def volume_status(self, volume_id):
        return self.rest('GET', '/os-volumes/%s' % volume_id)[1]['volume']

    def path(self, volume_id):
        """The volume's file, as volmig-volume records it."""
        return self.volumes.get_volume(self.admin, volume_id)['path']

    def server_get(self, server_id):
        return self.rest('GET', '/servers/%s' % server_id)[1]['server']

    def boot(self, volumes, host='compute-1', image='volmig-guest',
             mode='rw'):
        return self.boot_with([(vol, mode) for vol in volumes], host, image)

    def boot_with(self, disks, host='compute-1', image='volmig-guest'):
        """A server with ``disks``, (volume, attach_mode) pairs."""
        code, body = self.rest('POST', '/servers', {'server': dict({
            'name': 'vm', 'imageRef': image,
            'block_device_mapping_v2': [
                {'uuid': vol['id'], 'source_type': 'volume',
                 'destination_type': 'volume', 'attach_mode': mode,
                 'boot_index': None} for vol, mode in disks]},
            # None: wherever the scheduler places it.
            **({'availability_zone': 'nova:%s' % host} if host else {}))})
        self.assertEqual(202, code, body)
        server_id = body['server']['id']
        self.wait_for_status(server_id, 'ACTIVE')
        return server_id

    def wait_for_status(self, server_id, status, task=None):
        def reached():
            server = self.server_get(server_id)
            if server['status'] == 'ERROR' and status != 'ERROR':
                # It will not get there: fail now, with the reason,
                # rather than at the end of the boot timeout.
                self.fail('server %s went ERROR waiting for %s: %s' % (
                    server_id, status, server.get('fault')))
            if server['status'] == status and \
                    server['OS-EXT-STS:task_state'] == task:
                return server
            return None
        return self.wait_until(reached, timeout=BOOT_TIMEOUT,
                               what='server %s to be %s' % (server_id,
                                                            status))

    def action(self, server_id, body):
        return self.rest('POST', '/servers/%s/action' % server_id, body)

    def stop(self, server_id):
        # Once it is idle: a drain or a volume's move is recorded done
        # when the guests let go of src, while they may still commit
        # into dst (task_state volume_migrating refuses the stop).
        self.wait_for_status(server_id, 'ACTIVE')
        code, body = self.action(server_id, {'os-stop': None})
        self.assertEqual(202, code, body)
        self.wait_for_status(server_id, 'SHUTOFF')

    def start(self, server_id):
        code, body = self.action(server_id, {'os-start': None})
        self.assertEqual(202, code, body)
        self.wait_for_status(server_id, 'ACTIVE')

    def migrate(self, volume_id, pool='pool-b'):
        code, body = self.rest('POST', '/os-volumes/%s/action' % volume_id,
                               {'os-migrate_volume': {'pool': pool}})
        return code, body

    def migrate_to(self, vol, pool: str) -> None:
        code, body = self.migrate(vol['id'], pool)
        self.assertEqual(202, code, body)

    def when_copying(self, vol) -> dict:
        """The volume's migration once it is copying (started)."""
        def started():
            code, body = self.rest(
                'GET', '/os-volume-migrations?volume_id=%s' % vol['id'])
            return next((migration for migration in body[
                'volume_migrations'] if migration['status'] ==
                states.STARTED), None)
        return self.wait_until(started, timeout=BOOT_TIMEOUT,
                               what='a migration of %s to copy' % vol['id'])

    def assert_moved(self, server, vol, pool: str, what: str) -> None:
        """The volume's move succeeded into ``pool``, and its file holds
        every write the guest acknowledged."""
        moved = self.wait_migrated(vol['id'])
        self.assertEqual('success', moved['migration_status'],
                         '%s: %s' % (what, moved.get('migration_error')))
        path = self.path(vol['id'])
        self.assertIn('/%s/' % pool, path, what)
        # The guest writes on: a slot may hold a newer block than the
        # acknowledgements read a moment before.
        self.assertEqual([], guest_writes.mismatches(
            path, self.acks(server, vol['id']), clean=False), what)

    def wait_migrated(self, volume_id):
        """The volume's move ended, and so did each guest's migration.

        The volume service records its move's end once every guest let
        go of src, while the guests may still be committing into dst
        (their servers still in task_state volume_migrating)."""
        volume = self.wait_until(
            lambda: (lambda v: v if v.get('migration_status') in
                     ('success', 'error') else None)(
                         self.volume_status(volume_id)),
            timeout=BOOT_TIMEOUT, what='volume %s to migrate' % volume_id)

        def guests_done():
            code, body = self.rest(
                'GET', '/os-volume-migrations?volume_id=%s' % volume_id)
            self.assertEqual(200, code, body)
            return all(migration['status'] in states.TERMINAL
                       for migration in body['volume_migrations'])

        self.wait_until(guests_done, timeout=BOOT_TIMEOUT,
                        what='the guests of volume %s to end their '
                        'migrations' % volume_id)
        return volume

    # The guest.

    def guest_dir(self, server_id):
        # Asked of the conductor (the API shows a server's host to admins
        # only, and the caller may be its tenant), once: a server stays on
        # its host, and some tests hold the conductor down.
        if server_id not in self._guest_dirs:
            host = self.conductor.instance_get(self.admin, server_id)['host']
            self._guest_dirs[server_id] = os.path.join(
                self.state_path, host, 'guests', server_id)
        return self._guest_dirs[server_id]

    @staticmethod
    def open_by(pid: int):
        """What a process has open now: (device, inode) of each file, and
        the names of those deleted since it opened them. QEMU opens the
        volumes through the share's mount point, so files are compared by
        inode, not by name."""
        fds = '/proc/%d/fd' % pid
        inodes, deleted = set(), []
        for fd in os.listdir(fds):
            try:
                target = os.readlink(os.path.join(fds, fd))
                found = os.stat(os.path.join(fds, fd))
            except FileNotFoundError:
                continue
            inodes.add((found.st_dev, found.st_ino))
            # The boot kernel and initramfs are memory files, never on
            # disk: "deleted" from their start.
            if target.endswith(' (deleted)') and not target.startswith(
                    '/memfd:'):
                deleted.append(target)
        return inodes, deleted

    def open_files(self, server):
        with open(os.path.join(self.guest_dir(server), 'qemu.pid')) as pid:
            return self.open_by(int(pid.read()))

    def holds(self, server, path) -> bool:
        found = os.stat(path)
        return (found.st_dev, found.st_ino) in self.open_files(server)[0]

    def console(self, server_id):
        reader = guest_writes.ConsoleReader(
            os.path.join(self.guest_dir(server_id), 'console.sock'))
        reader.start()
        self.addCleanup(reader.close)
        return reader

    def read_only_readers(self, hosts):
        """A multiattach volume of 16 MiB of random data, attached
        read-only to a guest on each of ``hosts``, each of which has
        checksummed it once; returns (volume, its sha256, servers)."""
        vol = self.volume(multiattach=True)
        want = self.fill(vol)
        servers = [self.boot([vol], host=host, mode='ro') for host in hosts]
        serial = guests.serial(vol['id'])
        for server in servers:
            self.wait_until(lambda s=server: 'SUM %s' % serial
                            in self.console_log(s), timeout=BOOT_TIMEOUT,
                            what='a checksum from the guest')
        return vol, want, servers

    def fill(self, vol) -> str:
        """Write 16 MiB of random data on the volume; returns its sha256,
        which a guest that reads it read-only prints."""
        content = os.urandom(16 * 1024 * 1024)
        with open(self.path(vol['id']), 'wb') as handle:
            handle.write(content)
        return hashlib.sha256(content).hexdigest()

    def assert_still_reading(self, vol, want, servers):
        """Each guest checksums the volume twice more, and every checksum
        it ever printed is ``want``."""
        serial = guests.serial(vol['id'])
        counts = [self.console_log(s).count('SUM %s' % serial)
                  for s in servers]
        for server, count in zip(servers, counts, strict=True):
            self.wait_until(lambda s=server, c=count: self.console_log(
                s).count('SUM %s' % serial) >= c + 2, timeout=BOOT_TIMEOUT,
                what='checksums from guest %s' % server)
            self.assertEqual({want}, {
                line.split()[2] for line in self.console_log(
                    server).splitlines() if line.startswith('SUM %s'
                                                            % serial)})

    def console_log(self, server_id):
        with open(os.path.join(self.guest_dir(server_id),
                               'console.log')) as log:
            return log.read()

    def acks(self, server_id, volume_id):
        return guest_writes.acknowledged(self.console_log(server_id),
                                         guests.serial(volume_id))

    def wait_for_acks(self, server_id, volume_id, count):
        self.wait_until(lambda: len(self.acks(server_id, volume_id))
                        >= count, timeout=BOOT_TIMEOUT,
                        what='%d acknowledged writes' % count)

    def assert_acked_on(self, path, acks, region=0):
        self.assertTrue(acks, 'the guest acknowledged no write')
        wrong = guest_writes.mismatches(path, acks, region=region)
        self.assertEqual([], wrong, 'blocks the guest acknowledged are '
                         'not on %s' % path)

"""Real Linux guests (volmig-guest) on the qemu driver, two agents; the
mixins of this module run on the libvirt driver too (``test_libvirt``).

Every guest runs the in-guest writer: sequence-numbered blocks, each
acknowledged on the serial console once it is on the disk. A test stops
the guest cleanly (os-stop: ACPI power-down) and then checks that the
volume holds every block the guest acknowledged, slot by slot. All
requests go through the REST API of a volmig-api process.
"""

import concurrent.futures
import time

from tests import real_guest
from tests.integration.real_guest_base import BOOT_TIMEOUT
from tests.integration.real_guest_base import RealGuestTestCase
from volmig import states
from volmig.compute.drivers import guests


class LiveDataPath:
    """The live migration, its cancel and the legacy swap under the
    in-guest writer: run on every compute driver."""

    def test_live_complete_keeps_every_acknowledged_write(self):
        vol = self.volume()
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 20)
        code, body = self.migrate(vol['id'])
        self.assertEqual(202, code, body)
        migrated = self.wait_migrated(vol['id'])
        self.assertEqual('success', migrated['migration_status'],
                         migrated.get('migration_error'))
        written = len(self.acks(server, vol['id']))
        # Writes that go straight to pool-b.
        self.wait_for_acks(server, vol['id'], written + 20)
        self.stop(server)
        self.assertIn('volmig-guest: DONE', self.console_log(server))
        path = self.path(vol['id'])
        self.assertIn('/pool-b/', path)
        self.assert_acked_on(path, self.acks(server, vol['id']))

    def attachment_id(self, server, volume_id):
        instance = self.conductor.instance_get(self.admin, server)
        [bdm] = [bdm for bdm in instance['block_devices']
                 if bdm['volume_id'] == volume_id]
        return bdm['attachment_id']

    def test_live_cancel_keeps_every_acknowledged_write_on_src(self):
        vol = self.volume()
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 20)
        attachment = self.attachment_id(server, vol['id'])
        migration = self.client.start(self.ctxt, attachment)
        # Writes into the overlay, then back into src by the commit.
        written = len(self.acks(server, vol['id']))
        self.wait_for_acks(server, vol['id'], written + 30)
        self.client.cancel(self.ctxt, attachment)
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        written = len(self.acks(server, vol['id']))
        self.wait_for_acks(server, vol['id'], written + 20)
        self.stop(server)
        path = self.path(vol['id'])
        self.assertIn('/pool-a/', path)
        self.assert_acked_on(path, self.acks(server, vol['id']))

    def test_legacy_swap_keeps_every_acknowledged_write(self):
        old, new = self.volume(), self.volume()
        server = self.boot([old])
        self.wait_for_acks(server, old['id'], 20)
        code, body = self.rest(
            'PUT', '/servers/%s/os-volume_attachments/%s'
            % (server, old['id']), {'volumeAttachment': {
                'volumeId': new['id']}})
        self.assertEqual(202, code, body)
        self.wait_until(lambda: [new['id']] == [
            v['id'] for v in self.server_get(server)[
                'os-extended-volumes:volumes_attached']],
            timeout=BOOT_TIMEOUT, what='the swap to end')
        self.wait_for_status(server, 'ACTIVE')
        # The device and its serial stay; the writes now reach new.
        written = len(self.acks(server, old['id']))
        self.wait_for_acks(server, old['id'], written + 20)
        self.stop(server)
        self.assert_acked_on(self.path(new['id']),
                             self.acks(server, old['id']))


class BootFromVolume:
    """A guest the firmware boots from a volume, on the driver of the
    class it is mixed into."""

    def test_boot_volume_migrates_live_and_boots_again(self):
        # As a cloud boots: the firmware reads the volume at boot_index 0
        # (volmig-guest on a syslinux disk); a data volume beside it.
        boot = self.volume(size_mb=64)
        with open(real_guest.disk(), 'rb') as source, \
                open(self.path(boot['id']), 'r+b') as target:
            target.write(source.read())
        data = self.volume()
        code, body = self.rest('POST', '/servers', {'server': {
            'name': 'vm', 'imageRef': '',
            'availability_zone': 'nova:compute-1',
            'block_device_mapping_v2': [
                {'uuid': boot['id'], 'source_type': 'volume',
                 'destination_type': 'volume', 'boot_index': 0},
                {'uuid': data['id'], 'source_type': 'volume',
                 'destination_type': 'volume', 'boot_index': None}]}})
        self.assertEqual(202, code, body)
        server = body['server']['id']
        self.wait_for_status(server, 'ACTIVE')
        self.assertEqual('', self.server_get(server)['image'])
        self.wait_for_acks(server, data['id'], 10)
        self.assertIn('BOOT %s' % guests.serial(boot['id']),
                      self.console_log(server))
        code, body = self.migrate(boot['id'])
        self.assertEqual(202, code, body)
        self.assertEqual('success',
                         self.wait_migrated(boot['id'])['migration_status'])
        self.assertIn('/pool-b/', self.path(boot['id']))
        written = len(self.acks(server, data['id']))
        self.wait_for_acks(server, data['id'], written + 10)
        self.stop(server)
        before = self.acks(server, data['id'])
        self.assert_acked_on(self.path(data['id']), before)
        # The firmware boots the migrated copy.
        boots = self.console_log(server).count('volmig-guest: up')
        self.start(server)
        self.wait_until(lambda: self.console_log(server).count(
            'volmig-guest: up') > boots, timeout=BOOT_TIMEOUT,
            what='the guest to boot from pool-b')
        self.wait_for_acks(server, data['id'], len(before) + 5)
        self.stop(server)
        self.assert_acked_on(self.path(data['id']),
                             self.acks(server, data['id']))


class LiveMigrationTest(LiveDataPath, BootFromVolume, RealGuestTestCase):

    def test_console_output_shows_the_kernel_booting(self):
        vol = self.volume()
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 1)
        code, body = self.action(server, {'os-getConsoleOutput': {}})
        self.assertEqual(200, code, body)
        self.assertIn('Linux version', body['output'])
        self.assertIn('volmig-guest: up', body['output'])
        code, body = self.action(server,
                                 {'os-getConsoleOutput': {'length': 2}})
        self.assertEqual(200, code, body)
        self.assertEqual(2, len(body['output'].splitlines()))
        code, body = self.action(server,
                                 {'os-getConsoleOutput': {'length': 'x'}})
        self.assertEqual(400, code, body)

    def test_a_guest_that_powers_itself_off_is_shut_off(self):
        vol = self.volume()
        server = self.boot([vol], host='compute-2')
        self.wait_for_acks(server, vol['id'], 5)
        # The writer syncs and powers off: QMP SHUTDOWN, then QEMU exits.
        self.console(server).send('stop')
        self.wait_for_status(server, 'SHUTOFF')
        self.assertIn('volmig-guest: DONE', self.console_log(server))
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))
        self.start(server)
        self.wait_for_acks(server, vol['id'],
                           len(self.acks(server, vol['id'])) + 5)

    def test_an_unknown_or_malformed_image_is_refused(self):
        code, body = self.rest('POST', '/servers', {'server': {
            'name': 'vm', 'imageRef': '../../etc'}})
        self.assertEqual(400, code, body)
        self.assertIn('imageRef', body['badRequest']['message'])
        code, body = self.rest('POST', '/servers', {'server': {
            'name': 'vm', 'imageRef': 'no-such-image'}})
        self.assertEqual(202, code, body)
        server = self.wait_until(
            lambda: (lambda s: s if s['status'] == 'ERROR' else None)(
                self.server_get(body['server']['id'])),
            what='the build to fail')
        self.assertIn('no-such-image', server['fault']['message'])


class OfflineDataPath:
    """The migration of a stopped guest's volume, run on the libvirt
    driver (``test_libvirt``); the qemu driver's is in
    ``test_qemu_data_path``, where its agent needs no guest."""

    def test_offline_complete_after_a_clean_stop(self):
        vol = self.volume()
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 20)
        self.stop(server)
        before = self.acks(server, vol['id'])
        code, body = self.migrate(vol['id'])
        self.assertEqual(202, code, body)
        self.assertEqual('success',
                         self.wait_migrated(vol['id'])['migration_status'])
        path = self.path(vol['id'])
        self.assert_acked_on(path, before)
        # Booted again, the writer reads back where it was.
        self.start(server)
        self.wait_until(lambda: 'RESUME %s %d' % (
            guests.serial(vol['id']), max(before))
            in self.console_log(server), timeout=BOOT_TIMEOUT,
            what='the guest to resume from its last write')
        self.wait_for_acks(server, vol['id'], len(before) + 10)
        self.stop(server)
        self.assert_acked_on(path, self.acks(server, vol['id']))


class SharedVolumeTest(RealGuestTestCase):
    """A read-only volume on two hosts, migrated live while both guests
    read it (on the libvirt driver: ``test_libvirt``), and a
    single-attach volume refused on a second server (the conductor's rule,
    the same on every driver)."""

    def test_read_only_share_migrates_live_while_both_read(self):
        vol, want, servers = self.read_only_readers(('compute-1',
                                                     'compute-2'))
        code, body = self.migrate(vol['id'])
        self.assertEqual(202, code, body)
        self.assertEqual('success',
                         self.wait_migrated(vol['id'])['migration_status'])
        self.assert_still_reading(vol, want, servers)
        self.assertIn('/pool-b/', self.path(vol['id']))

    def test_second_attach_of_a_single_attach_volume_is_refused(self):
        vol, other = self.volume(), self.volume()
        server_a = self.boot([vol])
        server_b = self.boot([], host='compute-1')
        code, body = self.rest(
            'POST', '/servers/%s/os-volume_attachments' % server_b,
            {'volumeAttachment': {'volumeId': vol['id']}})
        self.assertEqual(400, code, body)
        self.assertIn(vol['id'], body['badRequest']['message'])
        # Nothing was left behind: the server attaches another volume.
        code, body = self.rest(
            'POST', '/servers/%s/os-volume_attachments' % server_b,
            {'volumeAttachment': {'volumeId': other['id']}})
        self.assertEqual(200, code, body)
        self.wait_until(lambda: self.volume_status(other['id'])['status']
                        == 'in-use', what='the volume to be in-use')
        self.assertEqual('ACTIVE', self.server_get(server_a)['status'])


class SharedVolumes:
    """The seeds' scenario: one volume read/write on two hosts. Run on the
    libvirt driver (``test_libvirt``): on the qemu driver,
    ``test_multi_host`` refuses a read/write share on two hosts of their
    own, and the conductor's rules are the same for both."""

    def test_shared_read_write_across_hosts(self):
        vol1, vol2 = self.volume(multiattach=True), self.volume()
        server_a = self.boot([vol1], host='compute-1')
        server_b = self.boot([vol1], host='compute-2',
                             image='volmig-guest-r1')
        self.wait_for_acks(server_a, vol1['id'], 10)
        self.wait_for_acks(server_b, vol1['id'], 10)

        code, body = self.rest(
            'PUT', '/servers/%s/os-volume_attachments/%s'
            % (server_a, vol1['id']), {'volumeAttachment': {
                'volumeId': vol2['id']}})
        self.assertEqual(400, code, body)
        self.assertIn('fork', body['badRequest']['message'])
        code, body = self.migrate(vol1['id'])
        self.assertIn(code, (400, 409), body)
        for server in (server_a, server_b):
            self.assertEqual(
                [vol1['id']],
                [v['id'] for v in self.server_get(server)[
                    'os-extended-volumes:volumes_attached']])

        self.stop(server_a)
        self.stop(server_b)
        acks_a = self.acks(server_a, vol1['id'])
        acks_b = self.acks(server_b, vol1['id'])
        code, body = self.migrate(vol1['id'])
        self.assertEqual(202, code, body)
        self.assertEqual('success',
                         self.wait_migrated(vol1['id'])['migration_status'])
        path = self.path(vol1['id'])
        self.assert_acked_on(path, acks_a, region=0)
        self.assert_acked_on(path, acks_b, region=1)

        serial = guests.serial(vol1['id'])
        for server in (server_a, server_b):
            self.start(server)
        for server, acks in ((server_a, acks_a), (server_b, acks_b)):
            self.wait_until(
                lambda s=server, a=acks: 'RESUME %s %d' % (serial, max(a))
                in self.console_log(s), timeout=BOOT_TIMEOUT,
                what='guest %s to read back its last write' % server)


class AttachDetachTest(RealGuestTestCase):

    def attach(self, server, volume_id):
        return self.rest('POST', '/servers/%s/os-volume_attachments'
                         % server, {'volumeAttachment': {
                             'volumeId': volume_id}})

    def detach(self, server, volume_id):
        return self.rest('DELETE', '/servers/%s/os-volume_attachments/%s'
                         % (server, volume_id))

    def test_attach_and_detach_repeated_on_a_running_guest(self):
        server = self.boot([])
        vol = self.volume()
        serial = guests.serial(vol['id'])
        for round_ in range(1, 3):
            code, body = self.attach(server, vol['id'])
            self.assertEqual(200, code, body)
            self.wait_until(lambda r=round_: self.console_log(server).count(
                'RESUME %s' % serial) >= r, timeout=BOOT_TIMEOUT,
                what='the guest to see the disk')
            self.wait_for_status(server, 'ACTIVE')
            code, body = self.detach(server, vol['id'])
            self.assertEqual(202, code, body)
            self.wait_until(lambda: self.volume_status(vol['id'])['status']
                            == 'available', timeout=BOOT_TIMEOUT,
                            what='the volume to be available')
            self.wait_for_status(server, 'ACTIVE')
            self.assertIn('GONE %s' % serial, self.console_log(server))

    def test_detach_the_guest_does_not_release_in_time_is_a_fault(self):
        server = self.boot([], host='compute-2')
        vol = self.volume()
        code, body = self.attach(server, vol['id'])
        self.assertEqual(200, code, body)
        self.wait_until(lambda: 'RESUME %s' % guests.serial(vol['id'])
                        in self.console_log(server), timeout=BOOT_TIMEOUT,
                        what='the guest to see the disk')
        code, body = self.detach(server, vol['id'])
        self.assertEqual(202, code, body)
        found = self.wait_until(
            lambda: (lambda s: s if s.get('fault') else None)(
                self.server_get(server)), what='a fault on the server')
        self.assertIn('did not release the disk', found['fault']['message'])
        self.assertIsNone(found['OS-EXT-STS:task_state'])
        self.assertEqual('in-use', self.volume_status(vol['id'])['status'])
        # The guest lets go later; detaching again finishes the job.
        time.sleep(6)
        code, body = self.detach(server, vol['id'])
        self.assertEqual(202, code, body)
        self.wait_until(lambda: self.volume_status(vol['id'])['status']
                        == 'available', timeout=BOOT_TIMEOUT,
                        what='the volume to be available')

    def test_twelve_concurrent_attaches(self):
        shared = self.volume(multiattach=True)
        servers = [self.boot([], host=host)
                   for host in ('compute-1', 'compute-1', 'compute-2')]
        requests_ = [(servers[n % 3], shared['id']) for n in range(12)]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(lambda r: self.attach(*r)[0], requests_))
        self.assertFalse([c for c in codes if c >= 500], codes)
        # One attach per server wins; the guest sees the disk.
        self.assertEqual(3, codes.count(200), codes)
        serial = guests.serial(shared['id'])
        for server in servers:
            self.wait_until(lambda s=server: 'RESUME %s' % serial
                            in self.console_log(s), timeout=BOOT_TIMEOUT,
                            what='guest %s to see the shared disk' % server)
            self.wait_for_status(server, 'ACTIVE')
            # Nothing was left behind: another volume attaches.
            vol = self.volume()
            code, body = self.attach(server, vol['id'])
            self.assertEqual(200, code, body)
            self.wait_until(lambda s=server, v=vol: 'RESUME %s' % (
                guests.serial(v['id'])) in self.console_log(s),
                timeout=BOOT_TIMEOUT,
                what='guest %s to see the other disk' % server)
        # A volume that is not multiattach, two attaches per server at
        # once: one wins, the others are refused (400 or 409, never a
        # 5xx: self.rest fails on one), and one server holds it.
        alone = self.volume()
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda server: self.attach(
                server, alone['id']), servers * 2))
        codes = [code for code, _ in answers]
        self.assertEqual(1, codes.count(200), answers)
        self.assertLessEqual(set(codes) - {200}, {400, 409}, answers)
        self.assertEqual(1, len({a['instance_uuid'] for a in self.volumes.
                                 get_volume(self.admin, alone['id'])[
                                     'attachments']}), answers)

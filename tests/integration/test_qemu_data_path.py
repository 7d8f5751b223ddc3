"""Real data through real QEMU guests, with no byte lost.

Separate conductor, api, volmig-volume and a compute agent with the qemu
driver, over RabbitMQ. The guest writes through the NBD export of its
disk (see ``guest_io``); every write is recorded, and each test checks
the volume's file byte for byte against the image those writes make.
"""

import hashlib
import os
import shutil
import signal

from tests import nbd_writer as guest_io
from tests.integration import base
from volmig import exception
from volmig import states

MIB = 1024 * 1024
SIZE_MB = 16
# Writes stay below this, so the last MiB of every volume stays zero.
WRITE_SPAN = (SIZE_MB - 1) * MIB


class QemuTestCase(base.ProcessTestCase):
    COMPUTES = 1
    VOLUME_SERVICE = True

    def options(self):
        return {('compute', 'driver'): 'qemu',
                ('qemu', 'export_disks'): True,
                # These guests run no OS: os-stop's ACPI power-down goes
                # unanswered, and the hard stop follows.
                ('compute', 'shutdown_timeout'): 1,
                ('volume', 'backend'): 'file',
                ('storage', 'pools'): self.pools(),
                # Small copy chunks, so zero detection is fine-grained.
                ('storage', 'copy_chunk_kb'): 64,
                # Longer than an agent restart on a busy machine: these
                # tests restart agents on purpose, and the healer must
                # not fail their migrations first.
                ('conductor', 'migration_stall_timeout'): 20}

    def setUp(self):
        super().setUp()
        # Guests outlive their agent by design; this test's must not
        # outlive the test.
        self.addCleanup(self.kill_guests)

    def kill_guests(self):
        guests = os.path.join(self.state_path, 'compute', 'guests')
        for uuid in os.listdir(guests) if os.path.isdir(guests) else []:
            pid = self.qemu_pid({'uuid': uuid})
            if pid:
                os.kill(pid, signal.SIGKILL)

    def boot(self, attach_mode='rw', host=None):
        vol = self.volumes.create_volume(self.admin, SIZE_MB,
                                         pool='pool-a')
        [server] = self.conductor.build_instances(
            self.user, 'vm', [{'volume_id': vol['id'], 'boot_index': 0,
                               'attach_mode': attach_mode}], 1, host)
        server = self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        return server, server['block_devices'][0], vol

    def guest_dir(self, server):
        return os.path.join(self.state_path, 'compute', 'guests',
                            server['uuid'])

    def writer(self, server, vol):
        writer = guest_io.GuestWriter(
            guest_io.nbd_socket(os.path.join(self.state_path, 'compute'),
                                server['uuid']), vol['id'])
        self.addCleanup(writer.close)
        return writer

    @staticmethod
    def write_some(writer, count, first=0):
        for number in range(first, first + count):
            offset = (number * 7919 * 4096) % WRITE_SPAN
            length = 4096 * (1 + number % 16)
            writer.write(1 + number % 250, offset, length)
        return first + count

    def assert_image(self, path, *writers):
        expected = bytes(SIZE_MB * MIB)
        for writer in writers:
            expected = writer.expected_image(expected)
        with open(path, 'rb') as handle:
            actual = handle.read()
        self.assertEqual(len(expected), len(actual))
        self.assertEqual(hashlib.sha256(expected).hexdigest(),
                         hashlib.sha256(actual).hexdigest(),
                         'volume file %s differs from the guest writes'
                         % path)

    def copy_to_dst(self, server, bdm, vol, size_mb=SIZE_MB):
        """Be the block-storage service: dst in pool-b, a copy of src."""
        dst = self.volumes.create_volume(self.admin, size_mb, pool='pool-b')
        if size_mb == SIZE_MB:
            shutil.copyfile(vol['path'], dst['path'])
        attachment = self.volumes.attachment_create(
            self.admin, dst['id'], server['uuid'], bdm['attach_mode'])
        return dst, attachment

    def complete_exactly(self, server, bdm, vol, writer, number,
                         migration) -> None:
        """Be block storage for a started migration: copy src to dst
        under writes, complete, and check dst against every write."""
        dst, attachment = self.copy_to_dst(server, bdm, vol)
        number = self.write_some(writer, 20, number)
        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        self.write_some(writer, 10, number)
        self.assert_image(dst['path'], writer)

    def wait_for_volume(self, volume_id, statuses):
        return self.wait_until(
            lambda: (lambda v: v if v.get('migration_status') in statuses
                     else None)(self.volumes.get_volume(self.admin,
                                                        volume_id)),
            what='volume %s to be %s' % (volume_id, statuses))

    def qemu_pid(self, server):
        """The guest's QEMU process, or None once it has exited."""
        try:
            with open(os.path.join(self.guest_dir(server),
                                   'qemu.pid')) as pid:
                qemu_pid = int(pid.read())
            with open('/proc/%d/cmdline' % qemu_pid, 'rb') as cmdline:
                running = server['uuid'].encode() in cmdline.read()
        except FileNotFoundError:
            running = False
        return qemu_pid if running else None

    def overlays(self, server):
        return [name for name in os.listdir(self.guest_dir(server))
                if name.startswith('overlay-')]


class LiveMigrationTest(QemuTestCase):

    def test_complete_with_writes_before_during_and_after_the_copy(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 40)

        self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b',
                                    max_bandwidth_mbps=8)
        during = 0
        while self.volumes.get_volume(
                self.admin, vol['id'])['migration_status'] == 'migrating':
            number = self.write_some(writer, 5, number)
            during += 5
        self.assertGreater(during, 0)
        moved = self.wait_for_volume(vol['id'], {'success', 'error'})
        self.assertEqual('success', moved['migration_status'],
                         moved.get('migration_error'))
        self.write_some(writer, 40, number)

        [migration_id] = moved['migration_ids']
        migration = self.client.wait_for(self.ctxt, migration_id,
                                         states.COMPLETED)
        self.assertEqual('live', migration['mode'])
        self.assertIn('start', migration['pauses_ms'])
        self.assertIn('complete', migration['pauses_ms'])
        self.assertEqual('pool-b', moved['pool'])
        self.assertFalse(os.path.exists(vol['path']))
        self.assert_image(moved['path'], writer)
        self.assertEqual([], self.overlays(server))
        server = self.conductor.instance_get(self.admin, server['uuid'])
        after = server['block_devices'][0]
        self.assertEqual(vol['id'], after['volume_id'])
        self.assertEqual(moved['path'],
                         after['connection_info']['data']['path'])

    def test_cancel_puts_the_guest_back_on_src(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(1, len(self.overlays(server)))
        number = self.write_some(writer, 30, number)

        self.client.cancel(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 10, number)
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        self.write_some(writer, 10, number)

        self.assert_image(vol['path'], writer)
        self.assertEqual([], self.overlays(server))

    def test_dst_of_the_wrong_size_is_refused_before_the_switch(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 20)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 20, number)

        _, attachment = self.copy_to_dst(server, bdm, vol,
                                         size_mb=SIZE_MB * 2)
        exc = self.assertRaises(exception.DestinationMismatch,
                                self.client.complete, self.ctxt,
                                bdm['attachment_id'], attachment['id'])
        self.assertIn('%d MiB' % (SIZE_MB * 2), str(exc))
        self.assertEqual(states.STARTED, self.client.get(
            self.ctxt, migration['id'])['status'])

        number = self.write_some(writer, 20, number)
        self.client.cancel(self.ctxt, bdm['attachment_id'])
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        self.assert_image(vol['path'], writer)
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual(bdm['attachment_id'],
                         server['block_devices'][0]['attachment_id'])

    def test_read_only_attachment_refuses_writes_and_migrates(self):
        server, bdm, vol = self.boot(attach_mode='ro')
        writer = self.writer(server, vol)
        self.assertRaises(guest_io.WriteFailed, writer.write, 0xab, 0, 4096)

        self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b')
        moved = self.wait_for_volume(vol['id'], {'success', 'error'})
        self.assertEqual('success', moved['migration_status'],
                         moved.get('migration_error'))
        self.client.wait_for(self.ctxt, moved['migration_ids'][0],
                             states.COMPLETED)

        writer = self.writer(server, vol)
        self.assertRaises(guest_io.WriteFailed, writer.write, 0xab, 0, 4096)
        self.assert_image(moved['path'])


class OfflineAndFaultsTest(QemuTestCase):

    def test_offline_complete_of_a_shut_off_server(self):
        server, bdm, vol = self.boot()
        before = self.writer(server, vol)
        self.write_some(before, 30)
        before.close()
        self.conductor.stop_instance(self.user, server['uuid'])
        self.wait_for_server(server['uuid'], states.VM_STOPPED)

        self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b')
        moved = self.wait_for_volume(vol['id'], {'success', 'error'})
        self.assertEqual('success', moved['migration_status'],
                         moved.get('migration_error'))
        migration = self.client.wait_for(self.ctxt, moved['migration_ids'][0],
                                         states.COMPLETED)
        self.assertEqual('offline', migration['mode'])

        self.conductor.start_instance(self.user, server['uuid'])
        self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        after = self.writer(server, vol)
        self.write_some(after, 30, 30)
        self.assert_image(moved['path'], before, after)

    def test_complete_after_the_guest_shut_itself_off(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 20)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.write_some(writer, 20, number)
        writer.close()
        # QEMU exits cleanly on SIGTERM, as when the guest powers off.
        os.kill(self.qemu_pid(server), signal.SIGTERM)
        self.wait_until(lambda: self.qemu_pid(server) is None,
                        what='QEMU to exit')

        dst, attachment = self.copy_to_dst(server, bdm, vol)
        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        self.assert_image(dst['path'], writer)
        self.assertEqual([], self.overlays(server))

    def test_agent_restarted_between_start_and_complete(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 20)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 20, number)
        qemu_pid = self.qemu_pid(server)

        self.cluster.restart('compute-1')
        # The guest keeps running and writing while its agent is away.
        number = self.write_some(writer, 20, number)
        dst, attachment = self.copy_to_dst(server, bdm, vol)
        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'])
        number = self.write_some(writer, 20, number)
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        self.write_some(writer, 20, number)

        self.assertEqual(qemu_pid, self.qemu_pid(server))
        self.assert_image(dst['path'], writer)

    def test_checksum_mismatch_cancels_and_keeps_the_volume_on_src(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)

        self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b',
                                    max_bandwidth_mbps=4)
        [target] = [v for v in self.volumes.list_volumes(self.admin)
                    if v.get('migration_source') == vol['id']]
        # The copy skips src's zero chunks, so a byte put into dst's last
        # MiB (zero in src) stays there until the checksum check.
        with open(target['path'], 'r+b') as dst_file:
            dst_file.seek(SIZE_MB * MIB - 1)
            dst_file.write(b'\x01')
        number = self.write_some(writer, 20, number)

        failed = self.wait_for_volume(vol['id'], {'success', 'error'})
        self.assertEqual('error', failed['migration_status'])
        self.assertIn('differs from its source',
                      failed['migration_error'])
        self.client.wait_for(self.ctxt, failed['migration_ids'][0],
                             states.CANCELLED)
        self.write_some(writer, 10, number)

        self.assertEqual('pool-a', failed['pool'])
        self.assertEqual(vol['path'], failed['path'])
        self.assertFalse(os.path.exists(target['path']))
        self.assert_image(vol['path'], writer)


class LegacySwapTest(QemuTestCase):

    def test_swap_under_writes_loses_nothing(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 40)
        new = self.volumes.create_volume(self.admin, SIZE_MB, pool='pool-b')

        self.conductor.swap_volume(self.admin, server['uuid'], vol['id'],
                                   new['id'])
        while self.conductor.instance_get(
                self.admin, server['uuid'])['task_state'] is not None:
            number = self.write_some(writer, 5, number)
        # The export follows the device to the new volume.
        self.write_some(writer, 40, number)

        server = self.conductor.instance_get(self.admin, server['uuid'])
        [after] = server['block_devices']
        self.assertEqual(new['id'], after['volume_id'])
        self.assertEqual(bdm['attach_mode'], after['attach_mode'])
        self.assertEqual([], self.volumes.get_volume(
            self.admin, vol['id'])['attachments'])
        self.assertEqual(['attached'], [a['attach_status'] for a in
                                        self.volumes.get_volume(
                                            self.admin, new['id'])[
                                                'attachments']])
        self.assert_image(new['path'], writer)

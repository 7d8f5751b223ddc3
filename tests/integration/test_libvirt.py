"""The real-guest data path on the libvirt driver: volmig-guest as a
libvirt domain, its writer's every acknowledged block checked on the
volume after a live migration, a cancel, a legacy swap, an offline
migration, and a cancel after the agent was SIGKILLed with the overlay in
libvirt's record but not in its own; a volume shared read/write by two
agents' guests (never migrated live); a read-only multiattach volume of
two guests of one agent, refused live; and the hot-plug of a volume. It
skips, saying why, where libvirt is not installed.
"""

import glob
import json
import os
import signal

from tests import libvirt_daemon
from tests.integration import real_guest_base
from tests.integration import test_real_guests
from volmig import embedded
from volmig import states


class LibvirtGuestTestCase(real_guest_base.RealGuestTestCase):
    COMPUTES = 1

    def setUp(self):
        reason = libvirt_daemon.unavailable()
        if reason:
            self.skipTest(reason)
        self.useFixture(libvirt_daemon.Libvirtd())
        super().setUp()
        # Each guest's QEMU runs as a user of its own, which libvirt gives
        # the guest's files but not the directories they are in: those
        # must let it through, as the README says of a host.
        embedded.let_through(self.state_path)

    def options(self):
        options = super().options()
        options[('compute', 'driver')] = 'libvirt'
        return options

    def kill_guests(self):
        import libvirt
        libvirt.registerErrorHandler(lambda *_: None, None)
        connection = libvirt.open(libvirt_daemon.URI)
        try:
            for host in self.hosts:
                guests = os.path.join(self.state_path, host, 'guests')
                for uuid in (os.listdir(guests) if os.path.isdir(guests)
                             else []):
                    try:
                        connection.lookupByUUIDString(uuid).destroy()
                    except libvirt.libvirtError:
                        pass  # Not running.
        finally:
            connection.close()


class LibvirtLiveMigrationTest(test_real_guests.LiveDataPath,
                               test_real_guests.OfflineDataPath,
                               LibvirtGuestTestCase):

    def test_agent_killed_before_its_record_then_cancel(self):
        vol = self.volume()
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 20)
        attachment = self.attachment_id(server, vol['id'])
        migration = self.client.start(self.ctxt, attachment)
        overlays = os.path.join(self.guest_dir(server), 'overlay-*')
        self.assertEqual(1, len(glob.glob(overlays)))
        # libvirtd keeps the guest on its overlay while no agent runs.
        agent = self.cluster.processes['compute-1']
        agent.may_die = True
        agent.stop(signal.SIGKILL)
        # As if it had died between libvirt's snapshot and its own record:
        # only libvirt knows of the overlay.
        record_file = os.path.join(self.guest_dir(server), 'guest.json')
        with open(record_file) as handle:
            record = json.load(handle)
        record['disks'][vol['id']]['overlay'] = None
        with open(record_file, 'w') as handle:
            json.dump(record, handle)
        self.cluster.restart('compute-1')
        self.cluster.wait_until_registered()
        written = len(self.acks(server, vol['id']))
        self.wait_for_acks(server, vol['id'], written + 20)
        self.client.cancel(self.ctxt, attachment)
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        self.assertEqual([], glob.glob(overlays))
        written = len(self.acks(server, vol['id']))
        self.wait_for_acks(server, vol['id'], written + 20)
        self.stop(server)
        self.assertIn('/pool-a/', self.path(vol['id']))
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))


class LibvirtSharedVolumeTest(test_real_guests.SharedVolumes,
                              LibvirtGuestTestCase):
    COMPUTES = 2

    def test_read_only_share_is_refused_live_and_both_keep_reading(self):
        # Two guests of one agent, each QEMU a user of its own, booting
        # the same image.
        vol, want, servers = self.read_only_readers(('compute-2',) * 2)
        code, body = self.migrate(vol['id'])
        self.assertEqual(400, code, body)
        self.assertIn('the libvirt driver switches a read-only disk',
                      body['badRequest']['message'])
        # Refused at the first start, before any guest moved.
        for migration in self.client.list(self.ctxt, volume_id=vol['id']):
            self.assertIn(migration['status'],
                          (states.ERROR, states.CANCELLED))
        self.assertIn('/pool-a/', self.path(vol['id']))
        self.assert_still_reading(vol, want, servers)


class LibvirtAttachDetachTest(LibvirtGuestTestCase):
    attach = test_real_guests.AttachDetachTest.attach
    detach = test_real_guests.AttachDetachTest.detach
    test_attach_and_detach_repeated_on_a_running_guest = (
        test_real_guests.AttachDetachTest.
        test_attach_and_detach_repeated_on_a_running_guest)

"""What another user of a host, and a guest's QEMU, cannot reach: the
modes of everything volmig creates, and QEMU's environment."""

import asyncio
import os
import signal
import stat

import fixtures
from qemu.qmp import qmp_client

from tests.integration import real_guest_base
from volmig import states
from volmig.compute.drivers.qemu import confinement

# A unit puts secrets in its services' environment (the broker's URL with
# its password); the test's services get one of that kind.
SECRET = 'confinement-secret-7d1f'


class ConfinementTest(real_guest_base.RealGuestTestCase):
    COMPUTES = 1

    def setUp(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_KEYSTONE_AUTHTOKEN__PASSWORD', SECRET))
        super().setUp()

    @staticmethod
    def mode(path):
        return stat.S_IMODE(os.stat(path).st_mode)

    def assert_private(self, directory):
        """Nothing in it is open to other users."""
        for root, dirs, files in os.walk(directory):
            for name in dirs + files:
                path = os.path.join(root, name)
                self.assertEqual(0, self.mode(path) & 0o007,
                                 '%s is %o' % (path, self.mode(path)))

    def qemu_pid(self, server):
        with open(os.path.join(self.guest_dir(server), 'qemu.pid')) as pid:
            return int(pid.read())

    @staticmethod
    def credentials(pid):
        with open('/proc/%d/status' % pid) as status:
            fields = dict(line.split(':', 1) for line in status)
        return (fields['Uid'].split(), fields['Gid'].split(),
                fields['Groups'].split())

    @staticmethod
    def qmp_refusals(socket_path, paths):
        """What QEMU answers when asked, on its own monitor, to open each
        of ``paths`` by name."""
        async def probe():
            client = qmp_client.QMPClient('probe')
            await client.connect(socket_path)
            answers = []
            try:
                for number, path in enumerate(paths):
                    try:
                        await client.execute('blockdev-add', {
                            'driver': 'file', 'filename': path,
                            'node-name': 'probe%d' % number})
                        answers.append('opened')
                    except qmp_client.ExecuteError as exc:
                        answers.append(str(exc))
            finally:
                await client.disconnect()
            return answers
        return asyncio.run(probe())

    def environ(self, pid):
        with open('/proc/%d/environ' % pid, 'rb') as handle:
            return handle.read()

    def test_files_are_private_and_qemu_gets_no_secret(self):
        vol, other = self.volume(), self.volume()
        for pool in ('pool-a', 'pool-b'):
            self.assertEqual(0o750, self.mode(os.path.join(self.state_path,
                                                           pool)))
        self.assertEqual(0o640, self.mode(self.path(vol['id'])))
        server = self.boot([vol])
        guest_dir = self.guest_dir(server)
        # The agent holds the secret; its guest's QEMU has PATH and a
        # locale, nothing else.
        agent = self.cluster.processes['compute-1'].process.pid
        self.assertIn(SECRET.encode(), self.environ(agent))
        with open(os.path.join(guest_dir, 'qemu.pid')) as pid:
            environ = self.environ(int(pid.read()))
        self.assertNotIn(SECRET.encode(), environ)
        self.assertEqual({b'PATH', b'LC_ALL'}, {
            entry.partition(b'=')[0] for entry in environ.split(b'\0')
            if entry})
        # The agent's records (the guest's, the jobs' journal) are its own.
        self.assertEqual(0o600, self.mode(os.path.join(guest_dir,
                                                       'guest.json')))
        # Started: the guest writes into an overlay only the agent reads.
        [bdm] = self.conductor.instance_get(self.admin,
                                            server)['block_devices']
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        overlay = os.path.join(guest_dir, 'overlay-%s.qcow2'
                               % migration['id'])
        self.assertEqual(0o600, self.mode(overlay))
        self.client.cancel(self.ctxt, bdm['attachment_id'])
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        # A move to another pool makes the volume's file anew.
        code, body = self.migrate(vol['id'])
        self.assertEqual(202, code, body)
        self.assertEqual('success',
                         self.wait_migrated(vol['id'])['migration_status'])
        self.assertIn('/pool-b/', self.path(vol['id']))
        self.assertEqual(0o640, self.mode(self.path(vol['id'])))
        # The legacy swap onto another volume.
        code, body = self.rest(
            'PUT', '/servers/%s/os-volume_attachments/%s'
            % (server, vol['id']), {'volumeAttachment': {
                'volumeId': other['id']}})
        self.assertEqual(202, code, body)
        self.wait_until(lambda: [other['id']] == [
            v['id'] for v in self.server_get(server)[
                'os-extended-volumes:volumes_attached']],
            timeout=real_guest_base.BOOT_TIMEOUT, what='the swap to end')
        self.wait_for_status(server, 'ACTIVE')
        for name in ('pool-a', 'pool-b', 'compute-1'):
            self.assert_private(os.path.join(self.state_path, name))

    def test_each_qemu_is_its_own_user_and_opens_no_file_by_name(self):
        vol_a, vol_b = self.volume(), self.volume()
        server_a, server_b = self.boot([vol_a]), self.boot([vol_b])
        uids = []
        for server in (server_a, server_b):
            pid = self.qemu_pid(server)
            uid, gid, groups = self.credentials(pid)
            # Real, effective, saved and file-system ids, all the guest's.
            self.assertEqual(1, len(set(uid)), uid)
            self.assertEqual(uid, gid)
            self.assertEqual([], groups)
            self.assertGreaterEqual(int(uid[0]), 1879048192)
            uids.append(uid[0])
            with open('/proc/%d/cmdline' % pid, 'rb') as cmdline:
                self.assertIn(confinement.SANDBOX.encode(),
                              cmdline.read().split(b'\0'))
        self.assertNotEqual(uids[0], uids[1])
        # With the agent gone, ask guest A's QEMU itself, on its monitor,
        # to open files by name: guest B's volume, and its own.
        agent = self.cluster.processes['compute-1']
        agent.may_die = True
        agent.stop(signal.SIGKILL)
        answers = self.qmp_refusals(
            os.path.join(self.guest_dir(server_a), 'qmp.sock'),
            [self.path(vol_b['id']), self.path(vol_a['id'])])
        for answer in answers:
            self.assertIn('Permission denied', answer)
        # The agent comes back to both guests, still running as they were,
        # and drives them again.
        # Ready before the calls: on a loaded machine its start and
        # recovery of both guests outlasted the start call's 30 s.
        self.cluster.restart('compute-1').wait_ready()
        for server in (server_a, server_b):
            self.assertEqual(uids.pop(0), self.credentials(
                self.qemu_pid(server))[0][0])
            [bdm] = self.conductor.instance_get(self.admin,
                                                server)['block_devices']
            migration = self.client.start(self.ctxt, bdm['attachment_id'])
            self.client.cancel(self.ctxt, bdm['attachment_id'])
            self.client.wait_for(self.ctxt, migration['id'],
                                 states.CANCELLED)

"""What the Cinder tests share: one Keystone and one Cinder per class.

One Keystone and one Cinder (api, scheduler, volume on PostgreSQL, NFS
backends on bind-mounted directories) serve every test of a class; each
test gets its own volmig deployment (conductor, api, one qemu agent) with
``[volume] backend = cinder``. Guests are volmig-guest with its writer,
and bytes are checked in the file Cinder keeps for the volume.
"""

import os

import testtools

from tests import cinder_deployment
from tests import openstack
from tests import real_guest
from tests.integration import base
from tests.integration import real_guest_base
from volmig.db import moves


@testtools.skipIf(openstack.missing(), openstack.missing())
class CinderTestCase(base.DeployedOnceTestCase,
                     real_guest_base.RealGuestTestCase):
    COMPUTES = 1
    VOLUME_SERVICE = False
    COMPUTE_OPTIONS: dict = {}

    @classmethod
    def deploy(cls, deployment):
        cls.keystone = deployment.useFixture(openstack.Keystone())
        cls.keystone.service_user('volmig')
        # Cinder finds the compute API in Keystone's catalog.
        cls.cinder = deployment.useFixture(cinder_deployment.Cinder(
            cls.keystone, cls.compute_url()))

    def process_options(self):
        # Only the services talk to Cinder and Keystone. keystoneauth
        # registers a plugin's options when it loads one, so they are not
        # options of this test process.
        options = {name: self.cinder.volmig_options()
                   for name in ('conductor', 'api', *self.hosts)}
        # Cinder calls the compute API with Keystone tokens.
        options['api'].update(self.keystone.authtoken_options())
        return options

    def rest(self, method, path, body=None, token=None):
        return super().rest(method, path, body,
                            token or self.keystone.admin.get_token())

    def cinder_volume(self, volume_type='nfs-a', multiattach=False):
        """A 1 GiB Cinder volume made through volmig's API, available."""
        code, body = self.rest('POST', '/os-volumes', {'volume': {
            'size': 1, 'pool': volume_type, 'multiattach': multiattach}})
        self.assertEqual(200, code, body)
        volume_id = body['volume']['id']
        self.wait_until(lambda: self.cinder.volume(volume_id)['status']
                        == 'available', timeout=60,
                        what='Cinder volume %s to be available' % volume_id)
        return body['volume']

    def cinder_attachments(self, volume_id):
        answer = self.cinder.request(
            'GET', '/attachments/detail?volume_id=%s' % volume_id)
        answer.raise_for_status()
        return answer.json()['attachments']

    def retype(self, volume_id, new_type):
        answer = self.cinder.request(
            'POST', '/volumes/%s/action' % volume_id, json={'os-retype': {
                'new_type': new_type, 'migration_policy': 'on-demand'}})
        self.assertEqual(202, answer.status_code, answer.text)

    def migrate_elsewhere(self, volume_id, pairs):
        """``cinder migrate`` (an admin's) to the other backend of its
        pair, ``{backend: other}``; returns the other."""
        host = self.cinder.volume(volume_id)['os-vol-host-attr:host']
        target = pairs[host.rpartition('#')[2]]
        answer = self.cinder.request(
            'POST', '/volumes/%s/action' % volume_id, json={
                'os-migrate_volume': {'host': self.cinder.pool_of(target)}})
        self.assertEqual(202, answer.status_code, answer.text)
        return target

    def wait_for_move(self, statuses):
        return self.wait_until(
            lambda: moves.get_all(self.admin, statuses), timeout=120,
            what='a volume move to be %s' % ' or '.join(statuses))

    def wait_cinder_migrated(self, volume_id):
        return self.wait_until(
            lambda: (lambda v: v if v.get('migration_status') in (
                'success', 'error') else None)(
                    self.cinder.volume(volume_id)), timeout=300,
            what='Cinder to migrate volume %s' % volume_id)

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

    def shared_volume(self, content=b'', volume_type='nfs-a-multi'):
        """A multiattach volume beginning with ``content``."""
        volume = self.cinder_volume(volume_type, multiattach=True)
        path = self.cinder.volume_file(self.cinder.volume(volume['id']))
        with open(path, 'r+b') as handle:
            handle.write(content)
        return volume, path

    def shared_by_two_writers(self, volume_type):
        """A multiattach volume (zeros: a slot no guest has written
        reads as zeros) that two guests write to, in regions of their
        own; returns (volume, its file, servers)."""
        shared, old_file = self.shared_volume(volume_type=volume_type)
        servers = [self.boot([shared], image=image) for image in
                   ('volmig-guest', 'volmig-guest-r1')]
        for server in servers:
            self.wait_for_acks(server, shared['id'], 10)
        return shared, old_file, servers

    def assert_writers_whole_on(self, shared, old_file, servers):
        """Every guest still writes to ``old_file``, which holds every
        write each one acknowledged."""
        for region, server in enumerate(servers):
            self.assertTrue(self.holds(server, old_file))
            written = len(self.acks(server, shared['id']))
            self.wait_for_acks(server, shared['id'], written + 10)
            self.stop(server)
            self.assert_acked_on(old_file, self.acks(server, shared['id']),
                                 region=region)

    def filled_volume(self, mib=256, volume_type='nfs-a'):
        """A volume with data to copy, so the copy takes a while."""
        volume = self.cinder_volume(volume_type)
        real_guest.fill(self.cinder.volume_file(self.cinder.volume(
            volume['id'])), mib)
        return volume

    def assert_moved_exactly(self, server, volume_id, backend='nfs-b'):
        volume = self.wait_cinder_migrated(volume_id)
        self.assertEqual('success', volume['migration_status'],
                         self.cinder.errors())
        written = len(self.acks(server, volume_id))
        self.wait_for_acks(server, volume_id, written + 10)
        self.wait_for_status(server, 'ACTIVE')
        self.stop(server)
        new_file = self.cinder.volume_file(volume)
        self.assertIn('/%s/' % backend, new_file)
        self.assert_acked_on(new_file, self.acks(server, volume_id))
        return volume

"""What the Cinder tests share: one Keystone and one Cinder per class.

One Keystone and one Cinder (api, scheduler, volume on PostgreSQL, NFS
backends on bind-mounted directories) serve every test of a class; each
test gets its own volmig deployment (conductor, api, one qemu agent) with
``[volume] backend = cinder``. Guests are volmig-guest with its writer,
and bytes are checked in the file Cinder keeps for the volume.

As in a cloud, the volumes under test are a tenant's: made in Cinder by a
member of a project that is not volmig's (``alice`` of ``tenant-a``), and
attached to that member's servers through volmig's API. ``bob`` of
``tenant-b`` is the other project; Cinder's own service user is the
admin who migrates.
"""


import testtools

from tests import cinder_deployment
from tests import openstack
from tests import real_guest
from tests.integration import base
from tests.integration import real_guest_base
from volmig.db import cinder_moves as moves

# (user, project): tenants of the cloud, each a member of its project.
TENANTS = (('alice', 'tenant-a'), ('bob', 'tenant-b'))


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
        # {user: a keystoneauth session in the user's own project}
        cls.tenants = {}
        for user, project in TENANTS:
            cls.keystone.user(user, cls.keystone.project(project),
                              ('member',))
            cls.tenants[user] = cls.keystone.session(
                user, openstack.SERVICE_PASSWORD, project)
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
        """volmig's API as ``alice``, unless another token is given."""
        return super().rest(method, path, body,
                            token or self.tenants['alice'].get_token())

    def boot(self, volumes, host=None, image='volmig-guest', mode='rw'):
        # A tenant's server: only an admin pins a host, and the scheduler
        # has one.
        return super().boot(volumes, host, image, mode)

    def cinder_volume(self, volume_type='nfs-a', user='alice'):
        """A 1 GiB volume that ``user`` made in Cinder, available; a
        multiattach type makes a multiattach volume."""
        answer = self.cinder.request('POST', '/volumes', self.tenants[user],
                                     json={'volume': {
                                         'size': 1,
                                         'volume_type': volume_type}})
        self.assertEqual(202, answer.status_code, answer.text)
        volume_id = answer.json()['volume']['id']
        return self.wait_until(
            lambda: (lambda v: v if v['status'] == 'available' else None)(
                self.cinder.volume(volume_id)), timeout=60,
            what='Cinder volume %s to be available' % volume_id)

    def setUp(self):
        super().setUp()
        # What Cinder holds of alice's quota already. A retype that a
        # killed cinder-volume cut off holds its reservations until they
        # expire (Cinder's reservation_expire, a day): an earlier test's,
        # never this one's.
        self.quota_at_start = self.cinder.quota_held(
            self.tenants['alice'].get_project_id())

    def assert_no_quota_held(self):
        """Cinder holds no more of alice's project's quota than when the
        test began: every reservation the test's requests made was
        committed or rolled back. A retype commits after it recorded the
        migration's end, which the test may see first: it has a minute
        to."""
        project_id = self.tenants['alice'].get_project_id()
        try:
            self.wait_until(
                lambda: self.cinder.quota_held(project_id)
                == self.quota_at_start, timeout=60,
                what="Cinder to settle the project's reservations")
        except AssertionError:
            pass  # Compared below, with what is still held.
        self.assertEqual(self.quota_at_start,
                         self.cinder.quota_held(project_id))

    def cinder_attachments(self, volume_id):
        answer = self.cinder.request(
            'GET', '/attachments/detail?all_tenants=1&volume_id=%s'
            % volume_id)
        answer.raise_for_status()
        return answer.json()['attachments']

    def retype(self, volume_id, new_type, user='alice'):
        """``cinder retype``, by the volume's owner ``user``, or with
        None by an admin of another project (Cinder's service user)."""
        answer = self.cinder.request(
            'POST', '/volumes/%s/action' % volume_id,
            self.tenants[user] if user else None, json={'os-retype': {
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

    def wait_for_move(self, statuses, count=1):
        """Until ``count`` volume moves are in one of ``statuses``."""
        return self.wait_until(
            lambda: (lambda found: found if len(found) >= count else None)(
                moves.get_all(self.admin, statuses)), timeout=120,
            what='%d volume move(s) to be %s' % (count,
                                                  ' or '.join(statuses)))

    def wait_cinder_migrated(self, volume_id):
        """Until Cinder's migration of the volume ended. A retype's
        ``retyping`` and a migrate's ``starting`` are set before the call
        returns: an earlier migration's end is never taken for this
        one's."""
        return self.wait_until(
            lambda: (lambda v: v if v.get('migration_status') in (
                'success', 'error') and v['status'] != 'retyping' else None)(
                    self.cinder.volume(volume_id)), timeout=300,
            what='Cinder to migrate volume %s' % volume_id)

    def shared_volume(self, content=b'', volume_type='nfs-a-multi'):
        """A multiattach volume beginning with ``content``."""
        volume = self.cinder_volume(volume_type)
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

    def filled_volume(self, mib=128, volume_type='nfs-a'):
        """A volume with data to copy, so the copy takes a while: 128 MiB
        at the agents' cap (16 MiB/s, ``real_guest_base``) is 8 s."""
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

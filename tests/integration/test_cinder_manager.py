"""The proposal inside Cinder: cinder-volume with volmig's manager
(``volume_manager = volmig.cinder_volume.manager.VolumeManager``) migrates an
attached volume itself: volmig starts, Cinder copies, volmig completes.

Each test starts that cinder-volume (backends nfs-c and nfs-d) on its own
volmig's broker. No volume move of volmig's compute API is involved.
"""

import os
import socket

from oslo_config import cfg
from oslo_context import context as oslo_context
from testtools import content

from tests import fixtures as volmig_fixtures
from tests.integration import cinder_base
from tests.integration import cluster
from volmig import client
from volmig import exception
from volmig import signing
from volmig import states
from volmig.conductor import cinder_moves as conductor_moves
from volmig.conf import CONF
from volmig.db import cinder_moves as moves

# Seconds volmig-api waits for the conductor, where a test holds it down:
# cinder-volume's calls then get no answer (ServiceTimeout) meanwhile.
API_WAIT = 6


class CinderManagerTest(cinder_base.CinderTestCase):

    def setUp(self):
        super().setUp()
        # This test's part of the log that every test's cinder-volume
        # appends to.
        log = os.path.join(self.cinder.dir, 'volmig-manager.log')
        self.log_offset = os.path.getsize(log) if os.path.exists(log) else 0
        self.cinder.start_volmig_volume(self.vhost.url)
        self.addCleanup(self.cinder.stop, 'cinder-volume-volmig')
        self.addOnException(lambda exc_info: self.addDetail(
            'volmig-manager.log', content.text_content(self.manager_log())))

    def assert_no_volume_move(self):
        """Cinder never called the compute API's swap."""
        self.assertEqual([], moves.get_all(
            self.admin, conductor_moves.ACTIVE + (conductor_moves.DONE,
                                                  conductor_moves.FAILED)))

    def manager_log(self):
        with open(os.path.join(self.cinder.dir, 'volmig-manager.log')) as log:
            log.seek(self.log_offset)
            return log.read()

    def wait_logged(self, *texts):
        """Until cinder-volume's log says each of ``texts``: it logs a
        failed migration only after it recorded the error that the test
        waits for."""
        self.wait_until(lambda: all(text in self.manager_log()
                                    for text in texts), timeout=60,
                        what='cinder-volume to log %s' % ', '.join(texts))

    def assert_attached_as_volmig_maps(self, volume_id, servers, mode):
        """Cinder's attachments of the volume are volmig's mappings.

        Cinder records its migration's success before it moves the new
        attachments onto the volume's id: they are listed a moment later.
        """
        attachments = self.wait_until(
            lambda: (lambda found: found if sorted(
                a['instance'] for a in found) == sorted(servers) else None)(
                    self.cinder_attachments(volume_id)), timeout=30,
            what='the attachments of servers %s' % ', '.join(servers))
        self.assertEqual({('attached', mode)}, {
            (a['status'], a['attach_mode']) for a in attachments})
        self.assertEqual(
            sorted((volume_id, a['id']) for a in attachments),
            sorted((bdm['volume_id'], bdm['attachment_id'])
                   for server in servers for bdm in
                   self.conductor.instance_get(
                       self.admin, server)['block_devices']))

    def test_migrate_and_retype_move_an_attached_volume_again(self):
        data = self.cinder_volume('volmig')
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 20)
        other = {'nfs-c': 'nfs-d', 'nfs-d': 'nfs-c'}
        # An admin migrates the tenant's volume, then the tenant retypes
        # it to the other backend's type and back.
        for count in (1, 2, 3):
            old_file = self.cinder.volume_file(self.cinder.volume(
                data['id']))
            if count == 1:
                target = self.migrate_elsewhere(data['id'], other)
            else:
                target = other[target]
                self.retype(data['id'], target)
            volume = self.wait_cinder_migrated(data['id'])
            self.assertEqual('success', volume['migration_status'],
                             self.cinder.errors())
            self.assertEqual(('in-use', 'volmig' if count == 1 else target),
                             (volume['status'], volume['volume_type']))
            self.assertIn('@%s#' % target, volume['os-vol-host-attr:host'])
            self.assert_attached_as_volmig_maps(data['id'], [server], 'rw')
            self.wait_until(lambda f=old_file: not os.path.exists(f),
                            timeout=60, what='Cinder to delete the old data')
            # volmig's live path ran for the attachment, driven by
            # Cinder's manager: started before Cinder's copy, completed
            # after it.
            migrations = self.client.list(self.ctxt, volume_id=data['id'])
            self.assertEqual([states.MODE_LIVE] * count,
                             [m['mode'] for m in migrations])
            for migration in migrations:
                self.client.wait_for(self.ctxt, migration['id'],
                                     states.COMPLETED)
            self.wait_for_status(server, 'ACTIVE')
        self.assert_no_volume_move()
        self.assert_no_quota_held()
        self.assert_moved_exactly(server, data['id'], target)

    def test_conductor_down_as_the_guest_switches_ends_in_success(self):
        """The conductor dies as the agent switches the guest onto the
        new volume, and stays down past volmig-api's wait for it:
        cinder-volume's calls meanwhile get no answer, which is no
        failure. Once the conductor is back, the migration completes,
        and Cinder's with it."""
        # From nfs-d to nfs-c: nfs-d's share is small, and a volume left
        # there would leave no room for a later test's (Cinder's scheduler
        # counts what is provisioned on it).
        data = self.cinder_volume('nfs-d')
        old_file = self.cinder.volume_file(self.cinder.volume(data['id']))
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        self.cluster.restart('api', options={
            ('DEFAULT', 'rpc_response_timeout'): API_WAIT}).wait_ready()
        self.crash_agent_at('--process=' + self.pid_file('conductor'),
                            'complete:switch')
        self.retype(data['id'], 'nfs-c')
        self.cluster.wait_for_death('conductor', timeout=300)
        written = len(self.acks(server, data['id']))
        self.wait_for_acks(server, data['id'], written + 10)
        self.wait_logged('migration_get: no answer')
        self.cluster.restart('conductor')
        self.assert_moved_exactly(server, data['id'], 'nfs-c')
        [migration] = self.client.list(self.ctxt, volume_id=data['id'])
        self.assertEqual(states.COMPLETED, self.client.wait_for(
            self.ctxt, migration['id'], states.COMPLETED)['status'])
        self.assert_no_volume_move()
        self.assert_no_quota_held()
        self.wait_until(lambda: not os.path.exists(old_file), timeout=60,
                        what='Cinder to delete the old data')

    def test_retype_switches_read_only_shares_together(self):
        content = os.urandom(4 * 1024 * 1024)
        shared, old_file = self.shared_volume(content, 'nfs-c-multi')
        servers = [self.boot([shared], mode='ro') for _ in range(2)]
        self.retype(shared['id'], 'nfs-d-multi')
        volume = self.wait_cinder_migrated(shared['id'])
        self.assertEqual('success', volume['migration_status'],
                         self.cinder.errors())
        self.assertEqual(('in-use', 'nfs-d-multi'),
                         (volume['status'], volume['volume_type']))
        # Every attachment is there: the delete of the old data waited
        # for Cinder's completion to move them onto the volume's id.
        self.assert_attached_as_volmig_maps(shared['id'], servers, 'ro')
        self.wait_until(lambda: not os.path.exists(old_file), timeout=60,
                        what='Cinder to delete the old data')
        new_file = self.cinder.volume_file(volume)
        self.assertIn('/nfs-d/', new_file)
        for server in servers:
            self.assertTrue(self.holds(server, new_file))
            self.assertEqual([], self.open_files(server)[1])
        with open(new_file, 'rb') as handle:
            self.assertEqual(content, handle.read(len(content)))
        self.assert_no_volume_move()

    def test_two_read_write_shares_are_refused_before_any_start(self):
        shared, old_file, servers = self.shared_by_two_writers('nfs-c-multi')
        # An admin of another project retypes the tenant's volume: Cinder
        # reserved its quota in the volume's project.
        self.retype(shared['id'], 'nfs-d-multi', user=None)
        volume = self.wait_cinder_migrated(shared['id'])
        self.assertEqual(('error', 'in-use', 'nfs-c-multi'),
                         (volume['migration_status'], volume['status'],
                          volume['volume_type']))
        self.wait_logged('volmig did not start attachment',
                         'at least one is read/write')
        # One line says why, and no traceback follows it.
        self.assertNotIn('Traceback', self.manager_log())
        self.assertNotIn('Exception during message handling',
                         self.manager_log())
        self.assert_no_quota_held()
        # volmig refused the first start: no guest left its volume.
        self.assertEqual([], self.client.list(self.ctxt,
                                              volume_id=shared['id']))
        self.assert_attached_as_volmig_maps(shared['id'], servers, 'rw')
        self.assert_writers_whole_on(shared, old_file, servers)

    def test_failed_copy_sends_the_guest_back_to_its_volume(self):
        # More data than nfs-d's share holds: Cinder's copy fails.
        data = self.filled_volume(256, 'nfs-c')
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        old_file = self.cinder.volume_file(self.cinder.volume(data['id']))
        before = sorted(os.listdir(self.cinder.exports['nfs-d']))
        self.retype(data['id'], 'nfs-d')
        volume = self.wait_cinder_migrated(data['id'])
        self.assertEqual(('error', 'in-use', 'nfs-c'),
                         (volume['migration_status'], volume['status'],
                          volume['volume_type']))
        [migration] = self.client.list(self.ctxt, volume_id=data['id'])
        self.assertEqual(states.CANCELLED, migration['status'])
        self.assert_attached_as_volmig_maps(data['id'], [server], 'rw')
        self.wait_logged('No space left on device')
        # Cinder deleted its new volume; the volume itself is whole.
        self.wait_until(lambda: sorted(os.listdir(
            self.cinder.exports['nfs-d'])) == before, timeout=60,
            what='the new volume to go')
        self.assertTrue(self.holds(server, old_file))
        self.assert_no_quota_held()
        written = len(self.acks(server, data['id']))
        self.wait_for_acks(server, data['id'], written + 10)
        self.stop(server)
        self.assert_acked_on(old_file, self.acks(server, data['id']))

    def test_another_cinder_hosts_key_reaches_no_volume_of_this_one(self):
        """A block-storage client's key, exported for another
        cinder-volume host, drives none of this host's volumes; this
        host's own does."""
        volume = self.cinder_volume('nfs-c')
        server = self.boot([volume])
        [bdm] = self.conductor.instance_get(self.admin,
                                            server)['block_devices']
        clients = {}
        for host in ('cinder-2', socket.gethostname()):
            path = os.path.join(self.state_path, 'cinder-%s.conf' % host)
            cluster.write_config(path, {
                ('DEFAULT', 'transport_url'): self.vhost.url,
                ('signing', 'key_file'): volmig_fixtures.export_key(
                    CONF.signing.key_file, signing.CLIENT, host,
                    os.path.join(self.state_path, 'key-%s.json' % host))})
            conf = cfg.ConfigOpts()
            conf(['--config-file', path], project='cinder')
            clients[host] = client.MigrationClient(conf=conf)
            self.addCleanup(clients[host].close)
        ctxt = oslo_context.RequestContext(roles=['service'])
        error = self.assertRaises(exception.MessageRefused,
                                  clients['cinder-2'].start, ctxt,
                                  bdm['attachment_id'])
        self.assertIn('volmig-client on cinder-2', str(error))
        self.assertIn('reports on its own records only', str(error))
        self.assertEqual([], self.client.list(self.ctxt,
                                              volume_id=volume['id']))
        # Its own host's key starts it; the guest goes back to its
        # volume.
        own = clients[socket.gethostname()]
        migration = own.start(ctxt, bdm['attachment_id'])
        own.cancel(ctxt, bdm['attachment_id'])
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED,
                             timeout=120)

    def test_cinder_volume_killed_mid_copy_sends_the_guest_back(self):
        # nfs-d holds this much; nfs-c takes it in a copy long enough to
        # be caught in.
        data = self.filled_volume(120, 'nfs-d')
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        old_file = self.cinder.volume_file(self.cinder.volume(data['id']))
        before = sorted(os.listdir(self.cinder.exports['nfs-c']))
        self.retype(data['id'], 'nfs-c')

        def started():
            found = self.client.list(self.ctxt, volume_id=data['id'])
            return found and found[0]['status'] != states.STARTING and found
        [migration] = self.wait_until(
            started, timeout=120, what='volmig to start the attachment')
        # Frozen as soon as the guest is on its overlay, mid-copy, then
        # killed: the sequence in that cinder-volume is gone.
        self.cinder.freeze('cinder-volume-volmig')
        self.assertEqual(states.STARTED, self.client.get(
            self.ctxt, migration['id'])['status'])
        self.cinder.kill('cinder-volume-volmig')
        written = len(self.acks(server, data['id']))
        self.wait_for_acks(server, data['id'], written + 10)

        self.cinder.start_volmig_volume(self.vhost.url)
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED,
                             timeout=120)
        volume = self.wait_cinder_migrated(data['id'])
        self.assertEqual(('error', 'in-use', 'nfs-d'),
                         (volume['migration_status'], volume['status'],
                          volume['volume_type']))
        self.wait_logged('cinder-volume stopped while it migrated')
        self.wait_until(lambda: sorted(os.listdir(
            self.cinder.exports['nfs-c'])) == before, timeout=60,
            what='the new volume to go')
        self.assert_attached_as_volmig_maps(data['id'], [server], 'rw')
        self.assertTrue(self.holds(server, old_file))
        written = len(self.acks(server, data['id']))
        self.wait_for_acks(server, data['id'], written + 10)
        self.stop(server)
        self.assert_acked_on(old_file, self.acks(server, data['id']))
        # The volume fills most of nfs-d's small share, and Cinder's
        # scheduler would send no later test's volume there: it goes.
        code, body = self.rest('DELETE', '/servers/%s' % server)
        self.assertEqual(204, code, body)
        self.wait_until(lambda: self.cinder.volume(data['id'])['status']
                        == 'available', timeout=60,
                        what='volume %s to be available' % data['id'])
        answer = self.cinder.request('DELETE', '/volumes/%s' % data['id'])
        self.assertEqual(202, answer.status_code, answer.text)
        self.wait_until(lambda: not os.path.exists(old_file), timeout=60,
                        what='Cinder to delete volume %s' % data['id'])

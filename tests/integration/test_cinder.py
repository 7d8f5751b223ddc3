"""Cinder as volmig's block storage, and an unmodified Cinder migrating
attached volumes through volmig's compute API (``cinder_base`` has the
deployment)."""

import os
import signal
import subprocess
import time

import sqlalchemy as sa

from tests import openstack
from tests.integration import cinder_base
from tests.integration import cluster
from volmig.db import cinder_moves as moves
from volmig.db import engine as db_engine
from volmig.db import models

# The steps of a volume move that follow the copy.
AFTER_COPY = ['completing', 'releasing', 'notifying']


class CinderVolumesTest(cinder_base.CinderTestCase):

    def test_guest_writes_reach_cinders_file_and_ro_is_cinders_own(self):
        data = self.cinder_volume()
        server = self.boot([data])
        [attachment] = self.cinder_attachments(data['id'])
        self.assertEqual(('attached', 'rw', server),
                         (attachment['status'], attachment['attach_mode'],
                          attachment['instance']))
        # os-brick found the file under the share's mount.
        self.assertEqual('nfs', attachment['connection_info'][
            'driver_volume_type'])
        # A second volume, attached read-only to the running guest:
        # Cinder records the mode itself (attachments at 3.54).
        shared = self.cinder_volume()
        code, body = self.rest(
            'POST', '/servers/%s/os-volume_attachments' % server,
            {'volumeAttachment': {'volumeId': shared['id'],
                                  'attach_mode': 'ro'}})
        self.assertEqual(200, code, body)
        [ro] = self.cinder_attachments(shared['id'])
        self.assertEqual(('attached', 'ro'), (ro['status'],
                                              ro['attach_mode']))
        self.assertEqual('in-use', self.volume_status(shared['id'])[
            'status'])
        # Before anyone but the compute service deletes an attachment in
        # use, Cinder asks the compute API (2.89, found in Keystone's
        # catalog) which attachment the server uses, and refuses.
        admin = self.keystone.admin
        refused = admin.delete(
            'http://127.0.0.1:%d/v3/%s/attachments/%s' % (
                self.cinder.port, admin.get_project_id(), attachment['id']),
            headers={'OpenStack-API-Version': 'volume 3.54'},
            raise_exc=False)
        self.assertEqual(409, refused.status_code, refused.text)
        # Cinder's own words: the server that uses it, and the way out.
        self.assertIn('%s using the Compute API' % server, refused.text)
        self.assertEqual('attached', self.cinder_attachments(data['id'])[0][
            'status'])
        self.wait_for_acks(server, data['id'], 20)
        self.stop(server)
        self.assert_acked_on(
            self.cinder.volume_file(self.cinder.volume(data['id'])),
            self.acks(server, data['id']))
        # Deleting the server gives both volumes back to Cinder.
        code, body = self.rest('DELETE', '/servers/%s' % server)
        self.assertEqual(204, code, body)
        for volume in (data, shared):
            self.wait_until(
                lambda v=volume: self.cinder.volume(v['id'])['status']
                == 'available', timeout=60,
                what='volume %s to be available' % volume['id'])
            self.assertEqual([], self.cinder_attachments(volume['id']))

    def test_cli_creates_a_cinder_volume_in_the_users_project(self):
        # The README's command, as a process, by a tenant.
        created = subprocess.run(
            [os.path.join(cluster.BIN_DIR, 'volmig'), '--os-endpoint',
             self.endpoint, '--os-token', self.tenants['alice'].get_token(),
             'volume', 'create', 'data', '--size', '1', '--pool',
             'nfs-a-multi', '--multiattach', '-f', 'value', '-c', 'id'],
            capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(0, created.returncode, created.stderr)
        volume_id = created.stdout.strip()
        volume = self.wait_until(
            lambda: (lambda v: v if v['status'] == 'available' else None)(
                self.cinder.volume(volume_id)), timeout=60,
            what='the volume to be available')
        self.assertEqual(('data', 'nfs-a-multi', True),
                         (volume['name'], volume['volume_type'],
                          volume['multiattach']))
        # The user's, in Cinder: its project owns it and is charged.
        alice = self.tenants['alice']
        self.assertEqual(alice.get_project_id(),
                         volume['os-vol-tenant-attr:tenant_id'])
        mine = self.cinder.request('GET', '/volumes/%s' % volume_id, alice)
        self.assertEqual(200, mine.status_code, mine.text)
        quota = self.cinder.request(
            'GET', '/os-quota-sets/%s?usage=true' % alice.get_project_id(),
            alice)
        self.assertEqual(200, quota.status_code, quota.text)
        self.assertGreaterEqual(quota.json()['quota_set']['volumes'][
            'in_use'], 1)
        theirs = self.cinder.request('GET', '/volumes/%s' % volume_id,
                                     self.tenants['bob'])
        self.assertEqual(404, theirs.status_code, theirs.text)

    def test_each_project_sees_its_own_volumes_and_an_admin_all(self):
        mine = self.cinder_volume(user='alice')
        theirs = self.cinder_volume(user='bob')
        bob = self.tenants['bob'].get_token()
        for token, seen, unseen in (
                (None, mine, theirs), (bob, theirs, mine),
                (self.keystone.admin.get_token(), mine, None)):
            code, body = self.rest('GET', '/os-volumes', token=token)
            self.assertEqual(200, code, body)
            listed = {volume['id'] for volume in body['volumes']}
            self.assertIn(seen['id'], listed)
            if unseen:
                self.assertNotIn(unseen['id'], listed)
        code, body = self.rest('GET', '/os-volumes', token=self.keystone.
                               admin.get_token())
        self.assertIn(theirs['id'], {v['id'] for v in body['volumes']})
        # Another project's volume is not found, to show or to use.
        code, body = self.rest('GET', '/os-volumes/%s' % mine['id'],
                               token=bob)
        self.assertEqual(404, code, body)
        self.assertIn(mine['id'], body['itemNotFound']['message'])
        code, body = self.rest('POST', '/servers', {'server': {
            'name': 'vm', 'imageRef': 'volmig-guest',
            'block_device_mapping_v2': [{
                'uuid': mine['id'], 'source_type': 'volume',
                'destination_type': 'volume', 'boot_index': None}]}},
            token=bob)
        self.assertEqual(404, code, body)
        self.assertIn(mine['id'], body['itemNotFound']['message'])
        code, body = self.rest('GET', '/servers', token=bob)
        self.assertEqual([], body['servers'])
        self.assertEqual(('available', []),
                         (self.cinder.volume(mine['id'])['status'],
                          self.cinder_attachments(mine['id'])))

    def test_unknown_volume_and_refusals_in_novas_shape(self):
        code, body = self.rest('POST', '/os-volumes', {'volume': {
            'size': 1, 'pool': 'no-such-type'}})
        self.assertEqual(400, code, body)
        self.assertIn('no-such-type', body['badRequest']['message'])
        code, body = self.rest(
            'GET', '/os-volumes/7f6f3e0c-27a1-4d8e-9c2f-6f0c1d2a3b4c')
        self.assertEqual(404, code, body)
        self.assertIn('itemNotFound', body)


class LiveRetype:
    """An unmodified Cinder's retype of a volume attached to a writing
    guest, on the driver of the class it is mixed into."""

    # The types the tenant retypes its volume to, one after another: the
    # same volume moves again and again (once is enough to prove another
    # driver).
    RETYPES = ('nfs-b', 'nfs-a', 'nfs-b')

    def test_retypes_move_an_attached_volume_live(self):
        data = self.cinder_volume('nfs-a')
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 20)
        for count, new_type in enumerate(self.RETYPES, 1):
            old_file = self.cinder.volume_file(self.cinder.volume(
                data['id']))
            self.retype(data['id'], new_type)
            volume = self.wait_cinder_migrated(data['id'])
            self.assertEqual('success', volume['migration_status'],
                             self.cinder.errors())
            self.assertEqual(('in-use', new_type),
                             (volume['status'], volume['volume_type']))
            self.assertIn('@%s' % new_type, volume['os-vol-host-attr:host'])
            self.assertEqual(count, len(self.wait_for_move(
                ['done'], count)))
            [attachment] = self.cinder_attachments(data['id'])
            self.assertEqual((server, 'attached'),
                             (attachment['instance'], attachment['status']))
            # volmig's mapping names the volume's id and the new
            # attachment.
            self.assertEqual(
                [(data['id'], attachment['id'])],
                [(bdm['volume_id'], bdm['attachment_id']) for bdm in
                 self.conductor.instance_get(self.admin,
                                             server)['block_devices']])
            self.wait_until(lambda f=old_file: not os.path.exists(f),
                            timeout=60, what='Cinder to delete the old file')
            # The next move begins once this one's commit has ended.
            self.wait_for_status(server, 'ACTIVE')
        # volmig's live path ran each time (a hypervisor copy records no
        # migration), and its moves are over.
        migrations = self.client.list(self.ctxt, volume_id=data['id'])
        self.assertEqual([('live', 'completed')] * count,
                         [(m['mode'], m['status']) for m in migrations])
        self.assertEqual(['done'] * count,
                         [move['status'] for move in moves.get_all(
                             self.admin, ['done', 'failed'])])
        self.assert_no_quota_held()
        written = len(self.acks(server, data['id']))
        self.wait_for_acks(server, data['id'], written + 20)
        self.stop(server)
        new_file = self.cinder.volume_file(volume)
        self.assertIn('/nfs-b/', new_file)
        self.assert_acked_on(new_file, self.acks(server, data['id']))


class CinderMigrationTest(LiveRetype, cinder_base.CinderTestCase):
    """An unmodified Cinder migrates attached volumes; volmig serves its
    swap requests with the live path."""

    def test_read_only_shares_switch_together(self):
        content = os.urandom(4 * 1024 * 1024)
        shared, old_file = self.shared_volume(content)
        servers = [self.boot([shared], mode='ro') for _ in range(2)]
        for server in servers:
            self.assertTrue(self.holds(server, old_file))
        self.retype(shared['id'], 'nfs-b-multi')
        volume = self.wait_cinder_migrated(shared['id'])
        self.assertEqual('success', volume['migration_status'],
                         self.cinder.errors())
        new_file = self.cinder.volume_file(volume)
        self.assertIn('/nfs-b/', new_file)
        # Cinder reports success before volmig's move ends (it may have to
        # attach a server again: Cinder's completion can lose one).
        self.wait_for_move(['done'])
        attachments = self.cinder_attachments(shared['id'])
        self.assertEqual(sorted(servers),
                         sorted(a['instance'] for a in attachments))
        # volmig's mappings name the attachments Cinder has.
        self.assertEqual(sorted(a['id'] for a in attachments), sorted(
            bdm['attachment_id'] for server in servers
            for bdm in self.conductor.instance_get(
                self.admin, server)['block_devices']))
        self.assertEqual({('attached', 'ro')}, {
            (a['status'], a['attach_mode']) for a in attachments})
        self.wait_until(lambda: not os.path.exists(old_file), timeout=60,
                        what='Cinder to delete the old file')
        # Every guest is on the new file: none holds the deleted one.
        for server in servers:
            self.assertTrue(self.holds(server, new_file))
            self.assertEqual([], self.open_files(server)[1])
        with open(new_file, 'rb') as handle:
            self.assertEqual(content, handle.read(len(content)))

    def test_two_read_write_shares_are_refused_and_lose_nothing(self):
        shared, old_file, servers = self.shared_by_two_writers('nfs-a-multi')
        # An admin of another project retypes the tenant's volume.
        self.retype(shared['id'], 'nfs-b-multi', user=None)
        volume = self.wait_cinder_migrated(shared['id'])
        # volmig answered the completion with an error and wrote nothing.
        self.assertEqual(('error', 'in-use', 'nfs-a-multi'),
                         (volume['migration_status'], volume['status'],
                          volume['volume_type']))
        # volmig tells Cinder before it records the move as failed.
        [move] = self.wait_for_move(['done', 'failed'])
        self.assertEqual('failed', move['status'])
        self.assertIn('read/write', move['error'])
        self.assertEqual(sorted(servers), sorted(
            a['instance'] for a in self.cinder_attachments(shared['id'])))
        self.assert_no_quota_held()
        self.assert_writers_whole_on(shared, old_file, servers)

    def test_agent_killed_mid_copy_copies_again(self):
        data = self.filled_volume()
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        self.retype(data['id'], 'nfs-b')
        [move] = self.wait_for_move(['copying'])
        self.cluster.restart('compute-1', sig=signal.SIGKILL)
        self.assert_moved_exactly(server, data['id'])
        # The restarted agent had forgotten the copy and did it again.
        with open(self.cluster.processes['compute-1'].log_path) as log:
            self.assertIn('Volume copy %s verified' % move['id'],
                          log.read())

    def test_conductor_killed_mid_copy_resumes_at_once(self):
        data = self.filled_volume()
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        self.retype(data['id'], 'nfs-b')
        self.wait_for_move(['copying'])
        # Back with a heal interval longer than the test: only taking up
        # its moves as it starts finishes this one.
        self.cluster.restart('conductor', sig=signal.SIGKILL, options={
            ('conductor', 'heal_interval'): 3600})
        self.assert_moved_exactly(server, data['id'])
        self.assertEqual('done', self.wait_for_move(['done', 'failed'])[0][
            'status'])

    def test_agent_killed_around_the_completion_ends_exact(self):
        data = self.filled_volume(64)
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        self.retype(data['id'], 'nfs-b')
        # The guests switch, the old attachments go, Cinder is told: the
        # agent dies at whichever of these it is in.
        self.wait_for_move(AFTER_COPY)
        self.cluster.restart('compute-1', sig=signal.SIGKILL)
        self.assert_moved_exactly(server, data['id'])
        self.assertEqual('done', self.wait_for_move(['done', 'failed'])[0][
            'status'])
        [migration] = self.client.list(self.ctxt, volume_id=data['id'])
        self.assertEqual('completed', migration['status'])

    def test_an_attachment_cinder_loses_as_it_completes_is_made_again(self):
        data = self.cinder_volume('nfs-a')
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        self.retype(data['id'], 'nfs-b')
        self.assertEqual('success', self.wait_cinder_migrated(data['id'])[
            'migration_status'], self.cinder.errors())
        [move] = self.wait_for_move(['done'])
        [lost] = self.cinder_attachments(data['id'])
        # Cinder 29.0.0's completion casts the delete of the old data
        # before it moves the new attachment onto the volume's id; when
        # the delete lands first, the attachment goes with it, and the
        # volume stays in-use with none. That state, in Cinder's
        # database, and the move's last step taken again, as by a
        # conductor that died right after the completion call.
        self.cinder.lose_attachment(lost['id'])
        self.assertEqual([], self.cinder_attachments(data['id']))
        with db_engine.get_engine().begin() as connection:
            connection.execute(sa.update(models.VolumeMove).where(
                models.VolumeMove.id == move['id']).values(
                    status='notifying'))
        self.assertEqual('done', self.wait_for_move(['done'])[0]['status'])
        [kept] = self.cinder_attachments(data['id'])
        self.assertNotEqual(lost['id'], kept['id'])
        self.assertEqual((server, 'attached', 'rw'),
                         (kept['instance'], kept['status'],
                          kept['attach_mode']))
        self.assertEqual('in-use', self.cinder.volume(data['id'])['status'])
        self.assertEqual([kept['id']], [
            bdm['attachment_id'] for bdm in self.conductor.instance_get(
                self.admin, server)['block_devices']])
        # The volume moves on from the attachment made again, and the
        # guest lost no write.
        self.wait_for_status(server, 'ACTIVE')
        self.retype(data['id'], 'nfs-a')
        self.assert_moved_exactly(server, data['id'], 'nfs-a')

    def test_cinder_api_down_while_completing_is_retried(self):
        # A copy that outlasts stopping cinder-api: 128 MiB at the class's
        # cap (16 MiB/s), 8 s at least on any machine. (1 GiB was 64 s
        # of copy, and of each check, in a 95 s test.)
        data = self.filled_volume(128, 'swap')
        server = self.boot([data])
        self.wait_for_acks(server, data['id'], 10)
        # cinder migrate, where the other tests retype.
        target = self.migrate_elsewhere(data['id'], {'nfs-a': 'nfs-b',
                                                     'nfs-b': 'nfs-a'})
        # Once the agent copies, the copy needs no Cinder: the agent has
        # the new volume's file open.
        [move] = self.wait_for_move(['copying'])
        new_file = os.stat(self.cinder.volume_file(self.cinder.volume(
            move['new_volume_id'])))
        agent = self.cluster.processes['compute-1'].process.pid
        self.wait_until(lambda: (new_file.st_dev, new_file.st_ino)
                        in self.open_by(agent)[0], timeout=60,
                        what='the agent to copy')
        self.cinder.stop('cinder-api')
        try:
            # Every step after the copy needs Cinder: the move waits at
            # one of them, and is never undone.
            [move] = self.wait_for_move(AFTER_COPY)
            time.sleep(5)
            self.assertIn(moves.get(self.admin, move['id'])['status'],
                          AFTER_COPY)
        finally:
            self.cinder.start('cinder-api')
        openstack.wait_for('cinder-api', self.cinder.api_ready)
        self.assert_moved_exactly(server, data['id'], target)
        self.assertEqual('done', moves.get(self.admin, move['id'])['status'])

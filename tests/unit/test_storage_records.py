"""volmig-volume's records in the database: races, moves and the import
of a JSON file an older release left."""

import datetime
import json
import os

import fixtures
import oslo_messaging as messaging

from tests import fixtures as volmig_fixtures
from tests.functional import test_races
from tests.unit import test_db
from volmig import exception
from volmig import signing
from volmig import states
from volmig.block_storage import file
from volmig.conf import CONF
from volmig.db import drains
from volmig.db import host_keys
from volmig.volume_service import manager


class StorageRecordsTest(test_db.DatabaseTestCase):

    def setUp(self):
        super().setUp()
        self.volumes = manager.FileVolumes()

    def test_one_of_several_racing_claims_wins(self):
        volume = self.volumes.create_volume(self.ctxt, 8, pool='a')

        def claim(pool):
            return lambda: self.volumes.update_volume(
                volume['id'], expected_status=(None,),
                migration_status='starting', migration_pool=pool)
        results = test_races.race(*[claim('p%d' % n) for n in range(4)])

        won = [r for r in results if isinstance(r, dict)]
        self.assertEqual(1, len(won))
        lost = [r for r in results
                if isinstance(r, exception.VolumeStatusChanged)]
        self.assertEqual(3, len(lost))
        self.assertIn('its migration status is now starting', str(lost[0]))
        current = self.volumes.get_volume(self.ctxt, volume['id'])
        self.assertEqual(won[0]['migration_pool'],
                         current['migration_pool'])

    def test_one_of_racing_attaches_of_a_single_attach_volume_wins(self):
        volume = self.volumes.create_volume(self.ctxt, 8, pool='a')
        shared = self.volumes.create_volume(self.ctxt, 8, pool='a',
                                            multiattach=True)

        def attach(volume_id, instance):
            return lambda: self.volumes.attachment_create(
                self.ctxt, volume_id, instance)
        # Six servers, two requests each, as a REST burst would send.
        servers = ['server-%d' % (n // 2) for n in range(12)]
        results = test_races.race(*[attach(volume['id'], server)
                                    for server in servers])

        won = [r for r in results if isinstance(r, dict)]
        self.assertEqual(1, len({r['instance_uuid'] for r in won}))
        lost = [r for r in results if isinstance(r, Exception)]
        self.assertEqual(12 - len(won), len(lost))
        for refused in lost:
            self.assertIsInstance(refused, exception.MultiattachNotSupported)
            self.assertEqual(400, refused.code)
            self.assertIn('is not multiattach and is already attached to '
                          'server %s' % won[0]['instance_uuid'], str(refused))
        self.assertEqual(
            sorted(r['id'] for r in won),
            sorted(a['id'] for a in self.volumes.get_volume(
                self.ctxt, volume['id'])['attachments']))
        # A multiattach volume takes them all.
        results = test_races.race(*[attach(shared['id'], server)
                                    for server in servers])
        self.assertEqual([], [r for r in results
                              if isinstance(r, Exception)])

    def test_adopt_moves_data_and_attachments_to_the_volume(self):
        volume = self.volumes.create_volume(self.ctxt, 8, pool='a')
        self.volumes.update_volume(volume['id'], path='/a/v')
        src = self.volumes.attachment_create(self.ctxt, volume['id'], 'i1')
        dst = self.volumes.create_volume(self.ctxt, 8, pool='b',
                                         migration_source=volume['id'])
        self.volumes.update_volume(dst['id'], path='/b/v')
        moved = self.volumes.attachment_create(self.ctxt, dst['id'], 'i1')

        self.volumes.adopt(volume['id'], dst['id'], {src['id']}, 'success')

        adopted = self.volumes.get_volume(self.ctxt, volume['id'])
        self.assertEqual(('b', '/b/v', '/a/v', 'success'),
                         (adopted['pool'], adopted['path'],
                          adopted['migration_src_path'],
                          adopted['migration_status']))
        self.assertEqual([moved['id']],
                         [a['id'] for a in adopted['attachments']])
        self.assertRaises(exception.VolumeNotFound,
                          self.volumes.get_volume, self.ctxt, dst['id'])
        self.assertRaises(exception.AttachmentNotFound,
                          self.volumes.attachment_get, self.ctxt, src['id'])

    def test_an_attached_volume_is_not_deleted(self):
        volume = self.volumes.create_volume(self.ctxt, 8, pool='a')
        self.volumes.attachment_create(self.ctxt, volume['id'], 'i1')
        error = self.assertRaises(exception.Conflict,
                                  self.volumes.delete_volume, self.ctxt,
                                  volume['id'])
        self.assertIn('volume %s is attached' % volume['id'], str(error))
        self.assertEqual('reserved', self.volumes.get_volume(
            self.ctxt, volume['id'])['status'])

    def test_volumes_by_id_are_those_get_volume_gives(self):
        shared = self.volumes.create_volume(self.ctxt, 8, pool='a',
                                            multiattach=True)
        alone = self.volumes.create_volume(self.ctxt, 8, pool='a')
        for instance in ('i1', 'i2'):
            self.volumes.attachment_create(self.ctxt, shared['id'], instance)
        found = self.volumes.volumes_by_id([shared['id'], alone['id'],
                                            'no-such-volume'])
        self.assertEqual({shared['id'], alone['id']}, set(found))
        for volume_id, volume in found.items():
            self.assertEqual(self.volumes.get_volume(self.ctxt, volume_id),
                             volume)
        self.assertEqual(2, len(found[shared['id']]['attachments']))

    def test_a_pools_drains_come_newest_first_a_page_at_a_time(self):
        began = datetime.datetime(2026, 1, 1)
        for n, pool in enumerate(['a', 'a', 'b', 'a']):
            drains.create(
                id='drain-%d' % n, pool=pool, target_pool='c',
                status='completed', max_parallel=1, volumes=[],
                created_at=began + datetime.timedelta(minutes=n))

        def page(limit, marker=None):
            return [d['id'] for d in drains.get_all('a', limit, marker)]
        self.assertEqual(['drain-3', 'drain-1'], page(2))
        self.assertEqual(['drain-0'], page(2, 'drain-1'))
        self.assertEqual([], page(2, 'drain-0'))
        self.assertRaises(exception.MarkerNotFound, page, 2, 'drain-9')

    def test_status_follows_the_attachments(self):
        volume = self.volumes.create_volume(self.ctxt, 8, pool='a')
        attachment = self.volumes.attachment_create(self.ctxt, volume['id'],
                                                    'i1', 'ro')
        self.volumes.update_volume(volume['id'], path='/a/v')
        connected = self.volumes.attachment_update(
            self.ctxt, attachment['id'], {'host': 'h', 'mode': 'ro'})
        self.assertEqual({'driver_volume_type': 'file',
                          'data': {'path': '/a/v', 'volume_id': volume['id'],
                                   'access_mode': 'ro'}},
                         connected['connection_info'])
        self.assertEqual('attaching', self.volumes.get_volume(
            self.ctxt, volume['id'])['status'])
        self.volumes.attachment_complete(self.ctxt, attachment['id'])
        self.assertEqual('in-use', self.volumes.get_volume(
            self.ctxt, volume['id'])['status'])
        self.volumes.attachment_delete(self.ctxt, attachment['id'])
        self.assertEqual('available', self.volumes.get_volume(
            self.ctxt, volume['id'])['status'])

    def test_the_json_file_of_an_older_release_is_imported_once(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'volumes.json')
        saved = {
            'volumes': {'v1': {
                'id': 'v1', 'name': 'data', 'size_mb': 64,
                'multiattach': True, 'pool': 'a', 'project_id': 'p',
                'path': '/a/volume-v1', 'migration_status': 'success',
                'migration_checksum': 'ab' * 32}},
            'attachments': {'a1': {
                'id': 'a1', 'volume_id': 'v1', 'instance_uuid': 'i1',
                'attach_mode': 'ro', 'attach_status': states.ATTACH_ATTACHED,
                'connector': {'host': 'h'},
                'connection_info': {'driver_volume_type': 'file'}}}}
        with open(path, 'w') as handle:
            json.dump(saved, handle)

        self.volumes.import_file(path)
        # An import cut off after its commit runs again harmlessly.
        self.volumes.restore(saved['volumes'].values(),
                             saved['attachments'].values())
        self.volumes.import_file(path)

        volume = self.volumes.get_volume(self.ctxt, 'v1')
        self.assertEqual(('data', 64, True, '/a/volume-v1', 'in-use',
                          'ab' * 32),
                         (volume['name'], volume['size_mb'],
                          volume['multiattach'], volume['path'],
                          volume['status'], volume['migration_checksum']))
        [attachment] = volume['attachments']
        self.assertEqual(saved['attachments']['a1'], attachment)
        self.assertFalse(os.path.exists(path))
        self.assertTrue(os.path.exists(path + '.imported'))
        self.assertEqual(1, len(self.volumes.list_volumes(self.ctxt)))


class FileAdapterReadsTest(test_db.DatabaseTestCase):
    """The conductor's adapter reads volumes in the database; nobody
    serves volmig-volume's topic here."""

    def setUp(self):
        super().setUp()
        CONF.set_override('rpc_response_timeout', 1)
        self.useFixture(volmig_fixtures.RPCFixture())
        volumes = manager.FileVolumes()
        self.volume = volumes.create_volume(self.ctxt, 8, pool='a')
        self.attachment = volumes.attachment_create(
            self.ctxt, self.volume['id'], 'server-1', 'ro')
        self.volume = volumes.get_volume(self.ctxt, self.volume['id'])
        self.adapter = file.FileVolumeAdapter()

    def test_with_the_database_volumes_and_attachments_are_read_there(self):
        found = self.adapter.with_database().get_volume(self.ctxt,
                                                        self.volume['id'])
        self.assertEqual(self.volume, found)
        self.assertEqual(self.attachment,
                         self.adapter.with_database().attachment_get(
                             self.ctxt, self.attachment['id']))
        unknown = '00000000-0000-0000-0000-000000000000'
        self.assertRaises(exception.VolumeNotFound,
                          self.adapter.with_database().get_volume,
                          self.ctxt, unknown)
        self.assertRaises(exception.AttachmentNotFound,
                          self.adapter.with_database().attachment_get,
                          self.ctxt, unknown)

    def test_without_it_volmig_volume_is_asked(self):
        # A volume node that holds a key, and does not answer.
        host_keys.register(signing.VOLUME, 'volume-1')
        self.assertRaises(messaging.MessagingTimeout,
                          self.adapter.get_volume, self.ctxt,
                          self.volume['id'])
        self.assertRaises(messaging.MessagingTimeout,
                          self.adapter.attachment_get, self.ctxt,
                          self.attachment['id'])

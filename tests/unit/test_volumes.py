"""Opening block storage's connection info on a host (os-brick)."""

import os

import fixtures
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import exception
from volmig.block_storage import cinder
from volmig.compute import volumes
from volmig.conf import CONF


class VolumeConnectorTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())
        self.connector = volumes.VolumeConnector(CONF)
        self.dir = self.useFixture(fixtures.TempDir()).path

    def test_file_is_its_path(self):
        self.assertEqual('/pools/a/v1', self.connector.path(
            {'driver_volume_type': 'file', 'data': {'path': '/pools/a/v1'}}))

    def test_local_through_os_brick(self):
        path = os.path.join(self.dir, 'disk')
        open(path, 'w').close()
        self.assertEqual(path, self.connector.path(
            {'driver_volume_type': 'local', 'data': {'device_path': path}}))

    def test_other_protocols_refused_by_name(self):
        for protocol in ('rbd', 'iscsi', None):
            error = self.assertRaises(
                exception.VolumeProtocolNotSupported, self.connector.path,
                {'driver_volume_type': protocol, 'data': {}})
            self.assertIn(repr(protocol), error.message)
            self.assertIn('nfs, local', error.message)
            self.assertEqual(400, error.code)

    def test_properties_name_the_host_and_address(self):
        CONF.set_override('my_ip', '192.0.2.7', group='compute')
        properties = self.connector.properties('compute-9')
        self.assertEqual(('compute-9', '192.0.2.7'),
                         (properties['host'], properties['ip']))


class CinderShapesTest(base.BaseTestCase):

    def test_flat_connection_info_gets_novas_shape(self):
        attachment = cinder._attachment({
            'id': 'a1', 'volume_id': 'v1', 'instance': 's1',
            'attach_mode': 'ro', 'status': 'attaching',
            'connection_info': {'driver_volume_type': 'nfs',
                                'export': 'h:/x', 'name': 'volume-v1'}})
        self.assertEqual({'driver_volume_type': 'nfs',
                          'data': {'export': 'h:/x', 'name': 'volume-v1'}},
                         attachment['connection_info'])
        self.assertEqual(('s1', 'ro', 'attaching'), (
            attachment['instance_uuid'], attachment['attach_mode'],
            attachment['attach_status']))

    def test_reserved_attachment_has_no_connection_info(self):
        attachment = cinder._attachment({
            'id': 'a1', 'volume_id': 'v1', 'instance': 's1',
            'status': 'reserved', 'connection_info': {}})
        self.assertEqual({}, attachment['connection_info'])
        self.assertEqual('rw', attachment['attach_mode'])

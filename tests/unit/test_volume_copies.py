"""The agent's jobs on volumes for a Cinder migration or drain, on real
files: a hash read from the disk, and a failure that names its cause."""

import hashlib
import os
import time
from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import context as volmig_context
from volmig import exception
from volmig import signing
from volmig.compute import copies
from volmig.compute import manager
from volmig.compute import volumes
from volmig.conf import CONF
from volmig.datapath import pacing


def connection(path: str) -> dict:
    return {'driver_volume_type': volumes.FILE, 'data': {'path': path}}


class VolumeCopiesTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.jobs = copies.VolumeCopies(CONF, volumes.VolumeConnector(CONF))
        self.addCleanup(self.jobs.stop)

    def ended(self, job_id: str) -> dict:
        for _ in range(1000):
            status = self.jobs.status(job_id)
            if status['state'] != copies.RUNNING:
                return status
            time.sleep(0.01)  # The job runs on the agent's pool.
        self.fail('job %s never ended' % job_id)

    def test_a_volume_is_hashed_from_the_disk(self):
        path = os.path.join(self.dir, 'volume')
        data = os.urandom(3 * 1024 * 1024 + 512)
        with open(path, 'wb') as volume:
            volume.write(data)
            volume.truncate(8 * 1024 * 1024)
        self.jobs.checksum('job-1', connection(path))
        status = self.ended('job-1')
        expected = hashlib.sha256(data + bytes(8 * 1024 * 1024 - len(data)))
        self.assertEqual((copies.DONE, expected.hexdigest()),
                         (status['state'], status['checksum']))

    def test_a_hash_that_fails_says_why(self):
        missing = os.path.join(self.dir, 'missing')
        self.jobs.checksum('job-2', connection(missing))
        status = self.ended('job-2')
        self.assertEqual(copies.FAILED, status['state'])
        self.assertIn('missing', status['error'])
        self.assertNotIn('Traceback', status['error'])

    def test_a_job_unknown_here_says_so(self):
        self.assertEqual({'state': copies.UNKNOWN}, self.jobs.status('other'))

    def test_only_a_volume_on_this_host_s_disk_is_paced(self):
        # An NFS share's disks are its server's, even where a directory
        # of this host's disk is bind-mounted as the share (os-brick's
        # mount is the boundary here): the pace would yield to this
        # host's guests for a copy that does not share their disk.
        src, dst = (os.path.join(self.dir, name) for name in ('src', 'dst'))
        for path, data in ((src, os.urandom(1024 * 1024)), (dst, b'')):
            with open(path, 'wb') as volume:
                volume.write(data)
                volume.truncate(1024 * 1024)
        nfs = {'driver_volume_type': 'nfs',
               'data': {'export': '127.0.0.1:/share', 'name': 'src'}}
        self.useFixture(fixtures.MockPatchObject(
            self.jobs.volumes, 'path', lambda info: info['data'].get(
                'path', src if info is nfs else dst)))
        shared = self.useFixture(fixtures.MockPatchObject(
            pacing, 'shared', wraps=pacing.shared)).mock
        local = {'driver_volume_type': 'local', 'data': {'path': src}}
        jobs = [('checksum', ('hash-file', connection(src))),
                ('checksum', ('hash-local', local)),
                ('checksum', ('hash-nfs', nfs)),
                ('start', ('copy-file', connection(src), connection(dst))),
                ('start', ('copy-nfs', nfs, connection(dst)))]
        for method, args in jobs:
            shared.reset_mock()
            getattr(self.jobs, method)(*args)
            self.assertEqual(copies.DONE, self.ended(args[0])['state'])
            [(path, _, paced)] = [call.args for call in shared.mock_calls]
            self.assertEqual((src, not args[0].endswith('nfs')),
                             (path, paced), args[0])


class AgentEndpointsTest(base.BaseTestCase):
    """Only a controller may ask an agent for a Nova guest's disk or a
    volume's hash: another agent, volmig-volume or a block-storage client
    naming any server, volume or connection is refused, and nothing is
    read or begun."""

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())
        self.read = []
        self.useFixture(fixtures.MockPatch(
            'volmig.compute.nova_disks.source',
            lambda *args: self.read.append(args) or '/live'))
        self.agent = mock.Mock(spec=['copies'])

    def call(self, sender, method, **kwargs):
        ctxt = volmig_context.RequestContext(sender=sender)
        try:
            return getattr(manager.ComputeManager, method)(
                self.agent, ctxt, **kwargs)
        except messaging.ExpectedException as exc:
            raise exc.exc_info[1] from None

    def test_hosts_and_clients_are_refused(self):
        calls = {'nova_disk': {'server_id': 'another-hosts-server',
                               'volume_id': 'another-tenants-volume'},
                 'volume_checksum': {'copy_id': 'job',
                                     'connection_info': connection('/x')}}
        for kind in (signing.COMPUTE, signing.VOLUME, signing.CLIENT):
            for method, kwargs in calls.items():
                self.assertRaises(exception.MessageRefused, self.call,
                                  signing.Sender(kind, 'compute-2'),
                                  method, **kwargs)
        self.assertEqual([], self.read)
        self.agent.copies.checksum.assert_not_called()
        # A controller's are served.
        controller = signing.Sender(signing.CONTROLLER, 'ctl')
        self.assertEqual('/live', self.call(controller, 'nova_disk',
                                            **calls['nova_disk']))
        self.call(controller, 'volume_checksum', **calls['volume_checksum'])
        self.agent.copies.checksum.assert_called_once_with(
            'job', connection('/x'))

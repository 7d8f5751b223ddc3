"""The migration flow across separate processes over RabbitMQ."""

import os
import signal

from oslo_config import cfg
from oslo_context import context as oslo_context
import oslo_messaging as messaging
from oslo_utils import uuidutils

from tests.integration import base
from volmig import client as volmig_client
from volmig import exception
from volmig import signing
from volmig import states


class MigrationOverRabbitTest(base.ProcessTestCase):

    def test_complete_on_one_host_and_cancel_on_the_other(self):
        server1, bdm1 = self.create_server('compute-1')
        server2, bdm2 = self.create_server('compute-2')
        self.assertEqual('compute-2', server2['host'])

        first = self.client.start(self.ctxt, bdm1['attachment_id'])
        second = self.client.start(self.ctxt, bdm2['attachment_id'])
        self.assertEqual((states.STARTED, 'compute-1'),
                         (first['status'], first['host']))
        self.assertEqual((states.STARTED, 'compute-2'),
                         (second['status'], second['host']))

        dst = self.dst_attachment(server1, bdm1)
        self.client.complete(self.ctxt, bdm1['attachment_id'], dst['id'])
        self.client.cancel(self.ctxt, bdm2['attachment_id'])
        self.client.wait_for(self.ctxt, first['id'], states.COMPLETED)
        self.client.wait_for(self.ctxt, second['id'], states.CANCELLED)

        server1 = self.conductor.instance_get(self.admin, server1['uuid'])
        self.assertEqual(dst['id'],
                         server1['block_devices'][0]['attachment_id'])
        server2 = self.conductor.instance_get(self.admin, server2['uuid'])
        self.assertEqual(bdm2['attachment_id'],
                         server2['block_devices'][0]['attachment_id'])
        self.assertEqual([None, None], [server1['task_state'],
                                        server2['task_state']])

    def test_refusals_cross_rabbitmq_typed(self):
        server, bdm = self.create_server('compute-1')
        self.assertRaises(exception.AttachmentNotFound, self.client.start,
                          self.ctxt, uuidutils.generate_uuid())
        exc = self.assertRaises(exception.InvalidInput, self.client.start,
                                self.ctxt, 'bogus')
        self.assertIn('src_attachment_id', str(exc))
        dst = self.dst_attachment(server, bdm)
        self.assertRaises(exception.InvalidMigrationState,
                          self.client.complete, self.ctxt,
                          bdm['attachment_id'], dst['id'])
        self.client.start(self.ctxt, bdm['attachment_id'])
        exc = self.assertRaises(exception.InstanceInvalidState,
                                self.conductor.stop_instance, self.user,
                                server['uuid'])
        self.assertIn(states.TASK_VOLUME_MIGRATING, str(exc))

    def test_client_embedded_in_a_service_with_its_own_config(self):
        # A block-storage service's own ConfigOpts, transport (without
        # volmig's exception modules) and oslo.context contexts.
        path = os.path.join(self.state_path, 'cinder.conf')
        key_file = self.cluster.export_key(signing.CLIENT, 'cinder-1')
        with open(path, 'w') as conf_file:
            conf_file.write('[DEFAULT]\ntransport_url = %s\n'
                            '[signing]\nkey_file = %s\n'
                            % (self.vhost.url, key_file))
        conf = cfg.ConfigOpts()
        conf(['--config-file', path], project='cinder')
        transport = messaging.get_rpc_transport(conf)
        self.addCleanup(transport.cleanup)
        ctxt = oslo_context.RequestContext(user_id='cinder',
                                           project_id='service',
                                           roles=['service'])
        server, bdm = self.create_server('compute-1')

        embedded = volmig_client.MigrationClient(transport=transport)
        missing = uuidutils.generate_uuid()
        # Typed, though this transport does not deserialize volmig's
        # exceptions itself.
        error = self.assertRaises(exception.AttachmentNotFound,
                                  embedded.start, ctxt, missing)
        self.assertIn(missing, str(error))
        migration = embedded.start(ctxt, bdm['attachment_id'])
        self.assertEqual(states.STARTED, migration['status'])

        # One built from the conf alone finishes what the first started.
        built = volmig_client.MigrationClient(conf=conf)
        self.addCleanup(built.close)
        dst = self.dst_attachment(server, bdm)
        built.complete(ctxt, bdm['attachment_id'], dst['id'])
        done = built.wait_for(ctxt, migration['id'], states.COMPLETED)
        self.assertEqual(dst['id'], done['dst_attachment_id'])
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual(dst['id'],
                         server['block_devices'][0]['attachment_id'])

    def test_agent_stopped_during_a_cast(self):
        server, bdm = self.create_server('compute-2')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.processes['compute-2'].stop(signal.SIGTERM)
        dst = self.dst_attachment(server, bdm)
        # The complete is accepted and cast to an agent that is gone.
        self.assertRaises(exception.MigrationFailed, self.client.complete,
                          self.ctxt, bdm['attachment_id'], dst['id'],
                          timeout=60)
        failed = self.client.get(self.ctxt, migration['id'])
        self.assertEqual(states.ERROR, failed['status'])
        self.assertEqual(states.COMPLETING, failed['error_phase'])
        self.assertIn('compute-2', failed['error_reason'])
        self.assertIn('is down', failed['error_reason'])
        self.assertTrue(failed['recovery_needed'])
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertIsNone(server['task_state'])

"""The transports operators run in production: quorum queues, and TLS."""

import subprocess

import kombu
import kombu.exceptions
import requests

from tests.integration import base
from tests.integration import broker_node
from volmig import states


class _MigrationRoundTrip:

    def migrate_and_cancel(self):
        server, bdm = self.create_server('compute-1')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        dst = self.dst_attachment(server, bdm)
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
        done = self.client.wait_for(self.ctxt, migration['id'],
                                    states.COMPLETED)
        self.assertEqual(dst['id'], done['dst_attachment_id'])
        other, other_bdm = self.create_server('compute-1')
        started = self.client.start(self.ctxt, other_bdm['attachment_id'])
        self.client.cancel(self.ctxt, other_bdm['attachment_id'])
        self.client.wait_for(self.ctxt, started['id'], states.CANCELLED)


class QuorumQueuesTest(_MigrationRoundTrip, base.ProcessTestCase):

    COMPUTES = 1
    OPTIONS = {('oslo_messaging_rabbit', 'rabbit_quorum_queue'): True}

    def test_services_consume_quorum_queues(self):
        self.migrate_and_cancel()
        listing = subprocess.run(
            ['rabbitmqctl', '-q', 'list_queues', '-p', self.vhost.name,
             '--no-table-headers', 'name', 'type'], check=True,
            capture_output=True, text=True, timeout=60).stdout
        kinds = dict(line.split('\t') for line in listing.splitlines())
        rpc_queues = {name: kind for name, kind in kinds.items()
                      if name.startswith('volmig-') and '_fanout' not in name}
        for queue in ('volmig-conductor', 'volmig-compute',
                      'volmig-compute.compute-1', 'volmig-api'):
            self.assertIn(queue, rpc_queues)
        self.assertEqual({'quorum'}, set(rpc_queues.values()), rpc_queues)


class TLSTest(_MigrationRoundTrip, base.ProcessTestCase):

    COMPUTES = 1

    def broker(self):
        self.tls = broker_node.BrokerNode(tls=True)
        return self.tls

    def options(self):
        options = super().options()
        options.update({('oslo_messaging_rabbit', 'ssl'): True,
                        ('oslo_messaging_rabbit', 'ssl_ca_file'):
                            self.tls.ca_file})
        return options

    def test_every_service_over_tls_only(self):
        plain = kombu.Connection('amqp://guest:guest@127.0.0.1:%d//'
                                 % self.tls.port, connect_timeout=5)
        self.assertRaises(kombu.exceptions.OperationalError,
                          plain.ensure_connection, max_retries=1)
        self.migrate_and_cancel()
        root = self.endpoint.rsplit('/v2.1', 1)[0]
        health = requests.get(root + '/healthcheck', timeout=30,
                              headers={'Accept': 'application/json'})
        self.assertEqual((200, ['database OK', 'RabbitMQ OK']),
                         (health.status_code, health.json()['reasons']))

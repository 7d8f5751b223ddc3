"""A RabbitMQ cluster of three nodes of the test's own, beside the
machine's broker, as clouds run one: volmig's queues are quorum queues,
each led by one node and copied to the others."""

import concurrent.futures
import json
import uuid

import fixtures

from tests.integration import broker_node


class BrokerCluster(fixtures.Fixture):

    NODES = 3

    def _setUp(self):
        prefix = 'volmigq%s' % uuid.uuid4().hex[:6]
        names = ['%s%d@localhost' % (prefix, n)
                 for n in range(1, self.NODES + 1)]
        self.nodes = [broker_node.BrokerNode(node=name, peers=names)
                      for name in names]
        # Started together: a node started alone waits for its peers
        # before it gives up and forms a cluster by itself.
        with concurrent.futures.ThreadPoolExecutor(self.NODES) as pool:
            started = [pool.submit(node.setUp) for node in self.nodes]
        for node in self.nodes:
            self.addCleanup(node.cleanUp)
        for future in started:
            future.result()
        status = self.nodes[0].ctl('cluster_status', '--formatter', 'json')
        running = json.loads(status.stdout or '{}').get('running_nodes', [])
        if sorted(running) != sorted(names):
            raise RuntimeError('the RabbitMQ nodes did not form one '
                               'cluster: %s %s' % (status.stdout,
                                                   status.stderr))

    def url(self, vhost: str) -> str:
        """Every node, as a deployment lists them."""
        return 'rabbit://%s/%s' % (','.join(
            'guest:guest@127.0.0.1:%d' % node.port for node in self.nodes),
            vhost)

    def vhost(self) -> fixtures.Fixture:
        """A vhost of its own for one test."""
        return _Vhost(self)

    def running(self) -> list:
        return [node for node in self.nodes
                if node.process.poll() is None]

    def leader(self, vhost: str, queue: str) -> broker_node.BrokerNode:
        """The node that leads ``queue`` now."""
        listing = self.running()[0].ctl(
            'list_queues', '-p', vhost, 'name', 'type', 'leader',
            '--formatter', 'json')
        listing.check_returncode()
        for entry in json.loads(listing.stdout):
            if entry['name'] == queue:
                if entry['type'] != 'quorum':
                    raise RuntimeError('%s is a %s queue' % (queue,
                                                             entry['type']))
                return next(node for node in self.nodes
                            if node.node == entry['leader'])
        raise RuntimeError('no queue %s in %s' % (queue, vhost))


class _Vhost(fixtures.Fixture):

    def __init__(self, brokers: BrokerCluster):
        super().__init__()
        self.brokers = brokers

    def _setUp(self):
        self.name = 'volmig-test-%s' % uuid.uuid4().hex[:10]
        node = self.brokers.running()[0]
        for command in (('add_vhost', self.name),
                        ('set_permissions', '-p', self.name, 'guest',
                         '.*', '.*', '.*')):
            node.ctl(*command).check_returncode()
        self.addCleanup(lambda: self.brokers.running()[0].ctl(
            'delete_vhost', self.name))
        self.url = self.brokers.url(self.name)

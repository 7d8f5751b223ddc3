"""volmig on a RabbitMQ cluster of three nodes with quorum queues, as
clouds run it, losing the node that leads the agent's queue.

A real guest writes throughout while its volume, on volmig-volume,
moves. The node that leads ``volmig-compute.compute-1`` (where the
agent takes its starts and completes) is SIGKILLed: as the agent takes
a start, during a copy, and as the agent takes a complete; it then
starts again and rejoins. Every service reconnects on its own: none is
restarted by the test.

Each move ends in success, each migration completed, one per move (no
message acted on twice made another), and the volume's file holds every
write the guest acknowledged. The cluster is shared by the class's
tests; each has a vhost of its own.
"""

import os
import time

from testtools import content

from tests.integration import base
from tests.integration import broker_cluster
from tests.integration import real_guest_base
from volmig import states

QUEUE = 'volmig-compute.compute-1'


class RabbitClusterTest(real_guest_base.RealGuestTestCase,
                  base.DeployedOnceTestCase):
    COMPUTES = 1
    COMPUTE_OPTIONS: dict = {}

    @classmethod
    def deploy(cls, deployment):
        cls.brokers = deployment.useFixture(broker_cluster.BrokerCluster())

    def broker(self):
        return self.brokers.vhost()

    def options(self):
        options = super().options()
        # Every queue on every node: the topic and server queues, and
        # the replies and fanouts too, so that no reply is lost with
        # the node that held it.
        options[('oslo_messaging_rabbit', 'rabbit_quorum_queue')] = True
        options[('oslo_messaging_rabbit',
                 'rabbit_transient_quorum_queue')] = True
        return options

    def setUp(self):
        for node in self.brokers.nodes:
            if node.process.poll() is not None:
                node.start()
        super().setUp()
        self.victim = os.path.join(self.state_path, 'victim.pid')

    def kill_leader_at(self, step: str):
        """The agent, started again, kills the node that leads its queue
        as its journal records ``step``; returns that node."""
        self.crash_agent_at('--process=' + self.victim, step)
        leader = self.brokers.leader(self.vhost.name, QUEUE)
        with open(leader.pid_file) as pid, open(self.victim, 'w') as victim:
            victim.write(pid.read())
        return leader

    def test_the_leader_killed_during_start_copy_and_complete(self):
        vol = self.volume(size_mb=32)
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 10)
        for phase, pool in (('start', 'pool-b'), ('copy', 'pool-a'),
                            ('complete', 'pool-b')):
            if phase == 'copy':
                leader = self.brokers.leader(self.vhost.name, QUEUE)
                asked = time.monotonic()
                self.migrate_to(vol, pool)
                self.when_copying(vol)
                leader.kill()
            else:
                leader = self.kill_leader_at(
                    'start:snapshot' if phase == 'start'
                    else 'complete:switch')
                asked = time.monotonic()
                self.migrate_to(vol, pool)
                leader.process.wait(real_guest_base.BOOT_TIMEOUT)
            self.assert_moved(server, vol, pool, 'leader killed during '
                              + phase)
            self.addDetail('move-with-leader-killed-during-' + phase,
                           content.text_content('%.1f s' % (
                               time.monotonic() - asked)))
            leader.start()

        # One migration per move, each completed.
        code, body = self.rest(
            'GET', '/os-volume-migrations?volume_id=%s' % vol['id'])
        self.assertEqual(200, code, body)
        self.assertEqual([states.COMPLETED] * 3, [
            migration['status'] for migration in body['volume_migrations']])
        self.stop(server)
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))

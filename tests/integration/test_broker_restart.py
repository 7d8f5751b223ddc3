"""RabbitMQ restarted (stop_app, start_app) in the middle of things.

Every connection of every test running at that moment breaks, so this
runs only when asked, alone: ``.ci/run`` runs it as its own step with
VOLMIG_TEST_BROKER_RESTART=1.
"""

import os
import signal
import subprocess  # nosec B404

import testtools

from tests.integration import test_qemu_recovery as recovery
from volmig import exception
from volmig import states


def _rabbitmqctl(*args):
    subprocess.run(['rabbitmqctl', '-q', *args], check=True,
                   capture_output=True, timeout=120)


@testtools.skipUnless(bool(os.environ.get('VOLMIG_TEST_BROKER_RESTART')),
                      'restarts RabbitMQ under every test running now; '
                      'set VOLMIG_TEST_BROKER_RESTART=1 and run it alone')
class BrokerRestartTest(recovery.RecoveryTestCase):

    def options(self):
        options = super().options()
        # A broker outage silences every agent: it must not count as the
        # agents being down, nor as migrations stalling.
        options.update({('DEFAULT', 'service_down_time'): 60,
                        ('conductor', 'migration_stall_timeout'): 60,
                        ('conductor', 'task_timeout'): 10})
        return options

    def test_broker_restarted_mid_migration_and_mid_delete(self):
        other, _, _ = self.boot()
        server, bdm, vol, writer, number, migration = (
            self.started_under_writes())

        # The seed case: a delete cast sits in the agent's queue when the
        # broker goes down, and is lost with it.
        consumed = self.vhost.consumed_queues()
        agent = self.cluster.processes['compute-1'].process
        agent.send_signal(signal.SIGSTOP)
        try:
            self.conductor.delete_instance(self.user, other['uuid'])
            _rabbitmqctl('stop_app')
            number = self.write_some(writer, 20, number)
            _rabbitmqctl('start_app')
            _rabbitmqctl('await_startup')
        finally:
            agent.send_signal(signal.SIGCONT)
        number = self.write_some(writer, 20, number)
        # A restarted broker has none of the queues it had (they are not
        # durable): a request sent before its server has declared its
        # queue again is dropped, and its caller times out. Be the
        # block-storage service once every listener is back, as its
        # operator would after an outage.
        self.wait_until(lambda: consumed <= self.vhost.consumed_queues(),
                        timeout=120, what='every listener to consume again')

        dst, attachment = self.copy_to_dst(server, bdm, vol)
        self.complete_retrying(bdm, attachment)
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED,
                             timeout=120)
        self.write_some(writer, 20, number)
        self.assert_image(dst['path'], writer)
        self.assert_nothing_left(server, migration)

        def deleted():
            try:
                self.conductor.instance_get(self.admin, other['uuid'])
            except exception.InstanceNotFound:
                return True
            return False
        self.wait_until(deleted, timeout=120, what='the lost delete')
        self.assertIsNone(self.qemu_pid(other))

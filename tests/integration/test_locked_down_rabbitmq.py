"""volmig on the users and permissions of ``tools/rabbitmq-setup.sh``.

Every controller service runs as its own RabbitMQ user, every host as a
user of its own, and a volume still migrates live, byte-exact, driven by
volmig-volume through the API's topic. Then each user tries what it must
not do, on the same broker.
"""

import os
import socket
import subprocess
import uuid

import amqp.exceptions
import kombu

from tests.integration import cluster
from tests.integration import test_qemu_data_path

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')
CONTROLLERS = ('api', 'conductor', 'manage')
MANAGE = os.path.join(cluster.BIN_DIR, 'volmig-manage')
SOME_ID = '5d4c9a53-6c8f-4e0e-9d6e-1f1f3c2b7a10'
# Every call that deletes or overrides records, as volmig-manage makes it,
# and what the conductor answers the manage user (it reached it).
OPERATOR_CALLS = (
    (['service', 'disable', 'volmig-compute', 'compute-1'], None),
    (['service', 'enable', 'volmig-compute', 'compute-1'], None),
    (['service', 'delete', 'volmig-compute', 'nohost'], 'nohost'),
    (['server', 'reset-state', SOME_ID], SOME_ID),
    (['migration', 'abort', SOME_ID], SOME_ID),
    (['migration', 'recover', SOME_ID], SOME_ID),
)


class OneUserPerService:
    """Each controller service, and each host, on its own RabbitMQ user,
    made by tools/rabbitmq-setup.sh; ``urls`` holds each one's, by
    ``kind`` or ``kind.host`` (``compute.compute-1``)."""

    def process_options(self):
        prefix = 'vt%s' % uuid.uuid4().hex[:8]
        passwords = os.path.join(self.state_path, 'rabbitmq')
        hosts = ['--compute', 'compute-1', '--compute', 'compute-2',
                 '--volume', socket.gethostname(), '--client', 'cinder-1']
        result = subprocess.run(
            [os.path.join(ROOT, 'tools', 'rabbitmq-setup.sh'), '--vhost',
             self.vhost.name, '--prefix', prefix, '--password-dir',
             passwords, *hosts], capture_output=True, text=True,
            timeout=300)
        self.assertEqual(0, result.returncode, result.stderr)
        self.urls, self.users = {}, {}
        for line in result.stdout.splitlines()[1:]:
            user, url = line.split(': ', 1)
            self.addCleanup(subprocess.run, ['rabbitmqctl', '-q',
                                             'delete_user', user],
                            capture_output=True, timeout=60)
            self.urls[user.split('-', 1)[1]] = url
            self.users[user.split('-', 1)[1]] = user
        self.volume_host = 'volume.%s' % socket.gethostname()
        self.assertEqual({*CONTROLLERS, 'compute.compute-1',
                          'compute.compute-2', self.volume_host,
                          'client.cinder-1'}, set(self.urls))
        options = super().process_options()
        # A fake agent beside the qemu one, on a state directory of its own
        # as on a host of its own.
        options.setdefault('compute-2', {}).update({
            ('compute', 'driver'): 'fake',
            ('compute', 'state_path'): os.path.join(self.state_path,
                                                    'compute-2')})
        for name, user in (('conductor', 'conductor'), ('api', 'api'),
                           ('volume', self.volume_host),
                           ('compute-1', 'compute.compute-1'),
                           ('compute-2', 'compute.compute-2')):
            options.setdefault(name, {})[('DEFAULT', 'transport_url')] = \
                self.urls[user]
        return options

    def manage_as(self, user, args):
        """volmig-manage, on the deployment's options, as ``user``."""
        own = cluster.write_config(
            os.path.join(self.state_path, 'manage-%s.conf' % user),
            {('DEFAULT', 'transport_url'): self.urls[user],
             ('DEFAULT', 'rpc_response_timeout'): 15})
        return subprocess.run(
            [MANAGE, '--config-file', self.cluster.config_file,
             '--config-file', own, *args], capture_output=True, text=True,
            timeout=120, check=False)

    def amqp(self, user: str) -> kombu.Connection:
        return kombu.Connection(self.urls[user].replace('rabbit://',
                                                        'amqp://'))


class LockedDownRabbitTest(OneUserPerService,
                           test_qemu_data_path.QemuTestCase):

    COMPUTES = 2

    def test_a_live_migration_with_one_user_per_service(self):
        server, bdm, vol = self.boot(host='compute-1')
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)
        self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b')
        number = self.write_some(writer, 20, number)
        done = self.wait_for_volume(vol['id'], {'success', 'error'})
        self.assertEqual(('success', 'pool-b'),
                         (done['migration_status'], done['pool']),
                         done.get('migration_error'))
        self.write_some(writer, 10, number)
        self.assert_image(done['path'], writer)

    def _refused(self, user, action) -> str:
        with self.amqp(user) as conn:
            channel = conn.channel()
            try:
                action(conn, channel)
            except amqp.exceptions.AccessRefused as exc:
                return str(exc)
            # Publishes are refused asynchronously: a round trip on the
            # channel brings the refusal back.
            try:
                channel.basic_qos(0, 1, False)
            except amqp.exceptions.AccessRefused as exc:
                return str(exc)
        self.fail('%s was allowed to do it' % user)

    def _allowed(self, user, action) -> None:
        with self.amqp(user) as conn:
            channel = conn.channel()
            action(conn, channel)
            channel.basic_qos(0, 1, False)

    @staticmethod
    def _publish(routing_key):
        def publish(conn, channel):
            kombu.Producer(channel).publish(
                {'x': 1}, exchange='volmig', routing_key=routing_key)
        return publish

    @staticmethod
    def _consume(queue):
        def consume(conn, channel):
            channel.basic_consume(queue, callback=lambda message: None)
        return consume

    @staticmethod
    def _bind(queue, routing_key):
        """A queue of its own name, bound to another's routing key."""
        def bind(conn, channel):
            channel.queue_declare(queue, auto_delete=True)
            channel.queue_bind(queue, 'volmig', routing_key)
        return bind

    def _queues(self, prefix: str) -> list[str]:
        return sorted(name for name in self.vhost.queues()
                      if name.startswith(prefix))

    def test_what_each_user_may_and_may_not_do(self):
        compute_2 = 'compute.compute-2'
        # Other kinds' topics, and the operator's.
        self.assertIn("topic 'volmig-api' in exchange 'volmig'",
                      self._refused(compute_2, self._publish('volmig-api')))
        self.assertIn("topic 'volmig-conductor-operator'", self._refused(
            compute_2, self._publish('volmig-conductor-operator')))
        self.assertIn("topic 'volmig-compute.compute-1' in exchange",
                      self._refused('client.cinder-1', self._publish(
                          'volmig-compute.compute-1')))
        # Another kind's queues, and another host's.
        self.assertIn("queue 'volmig-conductor'", self._refused(
            compute_2, self._consume('volmig-conductor')))
        self.assertIn("queue 'volmig-compute.compute-1'", self._refused(
            compute_2, self._consume('volmig-compute.compute-1')))
        self.assertIn("queue 'volmig-compute.compute-1'", self._refused(
            self.volume_host, self._consume('volmig-compute.compute-1')))
        self.assertIn("queue 'volmig-api'", self._refused(
            'client.cinder-1', self._consume('volmig-api')))
        # Another's routing key, on a queue of its own name.
        mine = 'reply_compute-2:attacker:1'
        self.assertIn("topic 'volmig-compute.compute-1' in exchange",
                      self._refused(compute_2, self._bind(
                          mine, 'volmig-compute.compute-1')))
        # The replies of every other process: the controllers' and the
        # other host's, named after each (oslo.messaging's queue manager).
        replies = self._queues('reply_')
        for owner in (':volmig-api:', 'compute-1:', ':volmig-volume:'):
            self.assertTrue(any(owner in name for name in replies),
                            '%s has no reply queue in %s' % (owner, replies))
        for name in replies:
            if not name.startswith('reply_compute-2:'):
                self.assertIn("queue '%s'" % name, self._refused(
                    compute_2, self._consume(name)))
        [fanout] = self._queues('volmig-compute_fanout_compute-1:')
        self.assertIn("queue '%s'" % fanout, self._refused(
            compute_2, self._consume(fanout)))
        # And what each needs, on the same broker.
        self._allowed(compute_2, self._publish('volmig-conductor'))
        self._allowed('client.cinder-1', self._publish('volmig-api'))
        self._allowed(compute_2, self._bind(mine, 'volmig-compute.compute-2'))

    def test_operator_calls_only_from_the_manage_user(self):
        for args, answer in OPERATOR_CALLS:
            # It may not even read the replies of volmig-manage.
            refused = self.manage_as('compute.compute-2', args)
            self.assertEqual(1, refused.returncode, refused)
            self.assertIn('RabbitMQ refused the call', refused.stderr)
            self.assertIn("refused for user '%s'" % self.users[
                'compute.compute-2'], refused.stderr)
            self.assertNotIn('Traceback', refused.stdout + refused.stderr)
            allowed = self.manage_as('manage', args)
            if answer is None:
                self.assertEqual(0, allowed.returncode, allowed)
            else:
                # The conductor's own refusal: the call reached it.
                self.assertIn(answer, allowed.stderr, allowed)
                self.assertNotIn('RabbitMQ', allowed.stderr)
        # Disabled by the manage user, then enabled again.
        self.assertFalse(any(
            service['disabled'] for service in self.conductor.service_get_all(
                self.admin, 'volmig-compute')))

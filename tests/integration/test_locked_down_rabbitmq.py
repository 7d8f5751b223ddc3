"""volmig on the users and permissions of ``tools/rabbitmq-setup.sh``.

Every service runs as its own RabbitMQ user and a volume still migrates
live, byte-exact, driven by volmig-volume through the API's topic. Then
each user tries what it must not do, on the same broker.
"""

import os
import subprocess
import uuid

import amqp.exceptions
import kombu

from tests.integration import cluster
from tests.integration import test_qemu_data_path

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')
KINDS = ('api', 'conductor', 'compute', 'volume', 'manage', 'client')
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


class LockedDownRabbitTest(test_qemu_data_path.QemuTestCase):

    def process_options(self):
        prefix = 'vt%s' % uuid.uuid4().hex[:8]
        passwords = os.path.join(self.state_path, 'rabbitmq')
        result = subprocess.run(
            [os.path.join(ROOT, 'tools', 'rabbitmq-setup.sh'), '--vhost',
             self.vhost.name, '--prefix', prefix, '--password-dir',
             passwords], capture_output=True, text=True, timeout=300)
        for kind in KINDS:
            self.addCleanup(subprocess.run, ['rabbitmqctl', '-q',
                                             'delete_user',
                                             '%s-%s' % (prefix, kind)],
                            capture_output=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stderr)
        self.urls = {}
        for line in result.stdout.splitlines()[1:]:
            user, url = line.split(': ', 1)
            self.urls[user.split('-', 1)[1]] = url
        self.assertEqual(set(KINDS), set(self.urls))
        options = super().process_options()
        for name in ['conductor', 'api', 'volume'] + ['compute-1']:
            kind = 'compute' if name.startswith('compute') else name
            options.setdefault(name, {})[('DEFAULT', 'transport_url')] = \
                self.urls[kind]
        return options

    def test_a_live_migration_with_one_user_per_service(self):
        server, bdm, vol = self.boot()
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

    def _refused(self, kind, action) -> str:
        with kombu.Connection(self.urls[kind].replace('rabbit://',
                                                      'amqp://')) as conn:
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
        self.fail('%s was allowed to do it' % kind)

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

    def test_what_each_user_may_and_may_not_do(self):
        self.assertIn("topic 'volmig-api' in exchange 'volmig'",
                      self._refused('compute', self._publish('volmig-api')))
        self.assertIn("topic 'volmig-compute.compute-1' in exchange",
                      self._refused('client', self._publish(
                          'volmig-compute.compute-1')))
        self.assertIn("queue 'volmig-conductor'", self._refused(
            'compute', self._consume('volmig-conductor')))
        self.assertIn("queue 'volmig-compute.compute-1'", self._refused(
            'volume', self._consume('volmig-compute.compute-1')))
        self.assertIn("queue 'volmig-api'", self._refused(
            'client', self._consume('volmig-api')))
        # And what each needs, on the same broker.
        with kombu.Connection(self.urls['compute'].replace(
                'rabbit://', 'amqp://')) as conn:
            channel = conn.channel()
            self._publish('volmig-conductor')(conn, channel)
            channel.basic_qos(0, 1, False)
        with kombu.Connection(self.urls['client'].replace(
                'rabbit://', 'amqp://')) as conn:
            channel = conn.channel()
            self._publish('volmig-api')(conn, channel)
            channel.basic_qos(0, 1, False)

    def manage_as(self, kind, args):
        """volmig-manage, on the deployment's options, as ``kind``'s
        RabbitMQ user."""
        own = cluster.write_config(
            os.path.join(self.state_path, 'manage-%s.conf' % kind),
            {('DEFAULT', 'transport_url'): self.urls[kind],
             ('DEFAULT', 'rpc_response_timeout'): 15})
        return subprocess.run(
            [MANAGE, '--config-file', self.cluster.config_file,
             '--config-file', own, *args], capture_output=True, text=True,
            timeout=120, check=False)

    def test_operator_calls_only_from_the_manage_user(self):
        for args, answer in OPERATOR_CALLS:
            refused = self.manage_as('compute', args)
            self.assertEqual(1, refused.returncode, refused)
            self.assertIn('RabbitMQ refused the call', refused.stderr)
            self.assertIn('volmig-conductor-operator', refused.stderr)
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

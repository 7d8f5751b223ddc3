"""volmig on the users and permissions of ``tools/rabbitmq-setup.sh``.

Every service runs as its own RabbitMQ user and a volume still migrates
live, byte-exact, driven by volmig-volume through the API's topic. Then
each user tries what it must not do, on the same broker.
"""

import json
import os
import subprocess
import uuid

import amqp.exceptions
import kombu
import oslo_messaging as messaging

from tests.integration import cluster
from tests.integration import test_qemu_data_path
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import signing
from volmig import states
from volmig.conf import CONF

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


class OneUserPerService:
    """Each service on its own RabbitMQ user, made by
    tools/rabbitmq-setup.sh; ``urls`` holds each kind's."""

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


class LockedDownRabbitTest(OneUserPerService,
                           test_qemu_data_path.QemuTestCase):

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


class CompromisedHostTest(OneUserPerService,
                          test_qemu_data_path.QemuTestCase):
    """A compute host's RabbitMQ user and its own key, in an attacker's
    hands, against a migration on another host (compute-1), with every
    service on its own user.

    The attacker's host, compute-9, needs no agent: what it holds is the
    volmig-compute user's password and the key exported for it.
    """

    def attacker_transport(self, signed: bool = True):
        """oslo.messaging on the compute user, signing with compute-9's
        key (or not at all)."""
        if not signed:
            transport = messaging.get_rpc_transport(
                CONF, url=self.urls['compute'],
                allowed_remote_exmods=rpc.ALLOWED_EXMODS)
        else:
            key_file = self.cluster.export_key(signing.COMPUTE, 'compute-9')
            self.conf_fixture.conf(key_file=key_file, group='signing')
            try:
                transport = rpc.get_transport(CONF, url=self.urls['compute'])
            finally:
                self.conf_fixture.conf(key_file=self.conf_fixture.key_file,
                                       group='signing')
        self.addCleanup(transport.cleanup)
        return messaging.get_rpc_client(
            transport, messaging.Target(exchange=rpc.EXCHANGE,
                                        topic='volmig-conductor',
                                        version='1.3'),
            serializer=rpc.RequestContextSerializer(), timeout=15)

    def publish_as_compute(self, body: dict, exchange: str,
                           routing_key: str) -> None:
        with kombu.Connection(self.urls['compute'].replace(
                'rabbit://', 'amqp://')) as conn:
            channel = conn.channel()
            kombu.Producer(channel).publish(
                json.dumps(body).encode(),
                exchange=exchange, routing_key=routing_key,
                content_type='application/json', content_encoding='utf-8')
            channel.basic_qos(0, 1, False)

    def conductor_refused(self, text: str) -> None:
        log = self.processes['conductor'].log_path

        def logged():
            with open(log) as lines:
                return text in lines.read()
        self.wait_until(logged, what='the conductor to log %r' % text)

    def capture_conductor_topic(self):
        """A queue of the test's (the vhost's admin) that gets a copy of
        every message sent to the conductor's topic: a captured
        message."""
        conn = kombu.Connection(self.vhost.url.replace('rabbit://',
                                                       'amqp://'))
        self.addCleanup(conn.release)
        queue = kombu.Queue('capture', kombu.Exchange(
            'volmig', type='topic', durable=False), 'volmig-conductor',
            auto_delete=True)(conn.channel())
        queue.declare()
        return queue

    def test_forged_replayed_and_unsigned_messages_change_nothing(self):
        capture = self.capture_conductor_topic()
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 20, number)
        before = self.conductor.migration_get(self.admin, migration['id'])
        count = len(self.conductor.migration_list(self.admin, {}))
        attacker = self.attacker_transport()
        ctxt = volmig_context.get_admin_context()
        # 1. Its own key: a report on another host's migration.
        for method, args in (
                ('migration_report_progress',
                 {'bytes_done': 1, 'bytes_total': 1}),
                ('migration_switched', {'pauses': {}}),
                ('migration_job_ended',
                 {'status': states.COMPLETED, 'pauses': {}})):
            error = self.assertRaises(
                exception.MessageRefused, attacker.call, ctxt, method,
                migration_id=migration['id'], **args)
            self.assertIn('reports on its own records only', str(error))
        # ...and a method an agent never calls.
        error = self.assertRaises(
            exception.MessageRefused, attacker.call, ctxt, 'migration_list',
            filters={})
        self.assertIn('not a method volmig-compute may call', str(error))
        # 2. The operator topic, through the default exchange (another
        # compromised host: each refusal is logged once per sender).
        key = signing.Keyring(self.cluster.export_key(signing.COMPUTE,
                                                      'compute-8'), '')
        message = {'method': 'migration_abort', 'version': '1.6',
                   'args': {'migration_id': migration['id']}}
        signed = signing.sign(key, 'volmig-conductor-operator', None,
                              ctxt.to_dict(), message)
        self.publish_as_compute(_oslo_body(message, signed), '',
                                'volmig-conductor-operator')
        self.conductor_refused('Refused RPC migration_abort from '
                               'volmig-compute on compute-8: not a method')
        # 3. A captured message sent again: volmig-api's begin of this
        # very start, with a new oslo.messaging id (the driver drops a
        # repeated one itself; an attacker changes it).
        begin = None
        while begin is None:
            captured = capture.get(no_ack=True)
            self.assertIsNotNone(captured, 'no migration_begin captured')
            body = json.loads(captured.body)
            raw = json.loads(body['oslo.message'])
            if raw['method'] == 'migration_begin':
                raw['_unique_id'] = uuid.uuid4().hex
                begin = dict(body, **{'oslo.message': json.dumps(raw)})
        self.publish_as_compute(begin, 'volmig', 'volmig-conductor')
        self.conductor_refused(': replayed (logged once')
        # 4. No signature at all.
        error = self.assertRaises(
            exception.MessageRefused, self.attacker_transport(False).call,
            ctxt, 'migration_job_ended', migration_id=migration['id'],
            status=states.COMPLETED, pauses={})
        self.assertIn('unsigned', str(error))
        # Nothing changed...
        after = self.conductor.migration_get(self.admin, migration['id'])
        for record in (before, after):
            record.pop('eta_seconds')
        self.assertEqual(before, after)
        self.assertEqual(count, len(self.conductor.migration_list(
            self.admin, {})))
        # ...and the real migration completes, byte-exact.
        self.complete_exactly(server, bdm, vol, writer, number, migration)


def _oslo_body(message: dict, ctxt: dict) -> dict:
    """A cast as oslo.messaging's RabbitMQ driver puts it on the wire."""
    raw = dict(message, _unique_id=uuid.uuid4().hex,
               **{'_context_%s' % key: value for key, value in ctxt.items()})
    return {'oslo.version': '2.0', 'oslo.message': json.dumps(raw)}

"""A compromised compute host, against the real broker and services.

The attacker holds what compute-2 holds: its exported key and its own
RabbitMQ user, as ``tools/rabbitmq-setup.sh`` makes it. Its victim is a
live migration of a writing guest on compute-1, with every service on its
own user, and the conductor letting unsigned messages in (an upgrade
under way: ``[signing] allow_unsigned``). Each attempt is refused; after
them all the records are as they were, volmig-volume was asked nothing,
and the migration completes with its bytes exact.
"""

import json
import math
import threading
import uuid

import kombu
import oslo_messaging as messaging

from tests.integration import test_locked_down_rabbitmq
from tests.integration import test_qemu_data_path
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import signing
from volmig import states
from volmig.conf import CONF
from volmig.signing import keys
from volmig.signing import seals


def _oslo_body(message: dict, ctxt: dict, **extra) -> dict:
    """A message as oslo.messaging's RabbitMQ driver puts it on the wire."""
    raw = dict(message, _unique_id=uuid.uuid4().hex, **extra,
               **{'_context_%s' % key: value for key, value in ctxt.items()})
    return {'oslo.version': '2.0', 'oslo.message': json.dumps(raw)}


class CompromisedHostTest(test_locked_down_rabbitmq.OneUserPerService,
                          test_qemu_data_path.QemuTestCase):

    COMPUTES = 2

    def process_options(self):
        options = super().process_options()
        options.setdefault('conductor', {})[
            ('signing', 'allow_unsigned')] = True
        return options

    def setUp(self):
        super().setUp()
        self.attacker = keys.Keyring(self.cluster.key_path(
            signing.COMPUTE, 'compute-2'), 'compute-2')
        self.ctxt_dict = volmig_context.get_admin_context().to_dict()

    def attacker_client(self, topic='volmig-conductor', server=None,
                        signed=True):
        """oslo.messaging on compute-2's user, sealing with its key (or
        not at all)."""
        if signed:
            self.conf_fixture.conf(group='signing',
                                   key_file=self.attacker.path)
        # Its replies in a queue of its own name, the one its user reads.
        self.conf_fixture.conf(group='oslo_messaging_rabbit',
                               hostname='compute-2')
        try:
            transport = (rpc.get_transport(CONF, url=self.urls[
                'compute.compute-2']) if signed else
                messaging.get_rpc_transport(
                    CONF, url=self.urls['compute.compute-2'],
                    allowed_remote_exmods=rpc.ALLOWED_EXMODS))
        finally:
            self.conf_fixture.conf(group='signing',
                                   key_file=self.conf_fixture.key_file)
            self.conf_fixture.conf(group='oslo_messaging_rabbit',
                                   hostname='test-host')
        self.addCleanup(transport.cleanup)
        return messaging.get_rpc_client(
            transport, messaging.Target(exchange=rpc.EXCHANGE, topic=topic,
                                        server=server, version='1.3'),
            serializer=rpc.RequestContextSerializer(), timeout=15)

    def post_as_attacker(self, body: dict, routing_key: str,
                         exchange: str = '') -> None:
        """Straight into a queue through the default exchange (every user
        that serves calls may publish there), or to the topic."""
        with self.amqp('compute.compute-2') as conn:
            channel = conn.channel()
            kombu.Producer(channel).publish(
                json.dumps(body).encode(), exchange=exchange,
                routing_key=routing_key, content_type='application/json',
                content_encoding='utf-8')
            channel.basic_qos(0, 1, False)

    def logged(self, process: str, text: str) -> None:
        log = self.processes[process].log_path

        def found():
            try:
                with open(log) as lines:
                    return text in lines.read()
            except FileNotFoundError:
                return False  # a process started again, not logging yet
        self.wait_until(found, what='%s to log %r' % (process, text))

    def admin_queue(self, routing_key: str):
        """A queue of the vhost's administrator that gets a copy of what
        is sent to ``routing_key``: what a capture sees."""
        conn = kombu.Connection(self.vhost.url.replace('rabbit://',
                                                       'amqp://'))
        self.addCleanup(conn.release)
        queue = kombu.Queue('capture-%s' % uuid.uuid4().hex[:6],
                            kombu.Exchange('volmig', type='topic',
                                           durable=False),
                            routing_key, auto_delete=True)(conn.channel())
        queue.declare()
        return queue

    @staticmethod
    def captured(queue, method: str) -> dict:
        while True:
            message = queue.get(no_ack=True)
            if message is None:
                raise AssertionError('no %s captured' % method)
            body = json.loads(message.body)
            raw = json.loads(body['oslo.message'])
            if raw['method'] == method:
                # A new oslo.messaging id: the driver drops a repeated
                # one itself; an attacker changes it.
                raw['_unique_id'] = uuid.uuid4().hex
                return dict(body, **{'oslo.message': json.dumps(raw)})

    def answered_by_attacker(self, queue, forge):
        """What a call to compute-9 raises when compute-2 answers it with
        ``forge(the request's nonce)``: the reply's result or failure."""
        asked = {}

        def ask():
            try:
                asked['answer'] = rpc.get_client(
                    'volmig-compute', '1.5', timeout=20).prepare(
                        server='compute-9').call(
                            self.admin, 'volume_copy_status', copy_id='c')
            except Exception as exc:
                asked['error'] = exc
        caller = threading.Thread(target=ask)
        caller.start()
        request = self.wait_until(lambda: queue.get(no_ack=True),
                                  what='the call to compute-9')
        raw = json.loads(json.loads(request.body)['oslo.message'])
        nonce = raw['_context_%s' % signing.SIGNATURE]['nonce']
        self.post_as_attacker(
            {'oslo.version': '2.0', 'oslo.message': json.dumps(dict(
                {'result': None, 'failure': None, 'ending': True,
                 '_msg_id': raw['_msg_id']}, **forge(nonce)))},
            raw['_reply_q'])
        caller.join(30)
        self.assertNotIn('answer', asked)
        return asked['error']

    def state(self, server, own) -> dict:
        """What an attack must leave as it was: the migration, both
        servers' mappings, and volmig-volume's attachments."""
        migrations = self.conductor.migration_list(self.admin, {})
        for migration in migrations:
            migration.pop('eta_seconds')
        return {
            'migrations': migrations,
            'mappings': [self.conductor.instance_get(
                self.admin, uuid)['block_devices']
                for uuid in (server['uuid'], own['uuid'])],
            'attachments': sorted(
                (attachment['id'], attachment['attach_status'],
                 attachment['instance_uuid'])
                for volume in self.volumes.list_volumes(self.admin)
                for attachment in volume['attachments'])}

    def test_a_compromised_host_changes_nothing_of_another(self):
        conductor_topic = self.admin_queue('volmig-conductor')
        compute_2_topic = self.admin_queue('volmig-compute.compute-2')
        server, bdm, vol = self.boot(host='compute-1')
        # The attacker's own server, on compute-2 (a fake agent).
        own, own_bdm = self.create_server(host='compute-2')
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 20, number)
        before = self.state(server, own)
        attacker = self.attacker_client()

        # 1. Another host's records, through a method that names its own
        # server: compute-1's mapping and attachments, a file of its own.
        for method, args in (
                ('volume_swapped', {
                    'old_bdm': dict(own_bdm, id=bdm['id'],
                                    attachment_id=bdm['attachment_id']),
                    'new_bdm': dict(bdm, attachment_id=own_bdm[
                        'attachment_id'], connection_info={
                            'driver_volume_type': 'file',
                            'data': {'path': '/etc/shadow'}})}),
                ('swap_failed', {'new_bdm': bdm})):
            error = self.assertRaises(
                exception.MessageRefused, attacker.call, self.admin, method,
                instance_uuid=own['uuid'], **args)
            self.assertIn('is not one that a swap of server %s made'
                          % own['uuid'], str(error))
        # ...and reports on the other host's migration.
        for method, args in (
                ('migration_report_progress',
                 {'bytes_done': 1, 'bytes_total': 1}),
                ('migration_job_ended',
                 {'status': states.COMPLETED, 'pauses': {}})):
            error = self.assertRaises(
                exception.MessageRefused, attacker.call, self.admin, method,
                migration_id=migration['id'], **args)
            self.assertIn('reports on its own records only', str(error))

        # 3. A reply in place of the server called: calls to compute-9
        # (whose queue the vhost's administrator reads here, as a broker
        # operator could) answered by compute-2, into the caller's reply
        # queue: "done" unsealed, and sealed with its own key, and a
        # refusal.
        rpc.register_host(signing.COMPUTE, 'compute-9')
        compute_9 = self.admin_queue('volmig-compute.compute-9')
        refusal = json.dumps({
            'class': 'MigrationInProgress', 'module': 'volmig.exception',
            'message': 'forged', 'tb': [], 'args': ['forged'],
            'kwargs': {}})
        for forge in (lambda nonce: {'result': {'status': 'done'}},
                      lambda nonce: {'result': seals.seal_reply(
                          self.attacker.signing_key().secret,
                          self.attacker.signing_key().id,
                          signing.Sender(signing.COMPUTE, 'compute-9'),
                          nonce, 'volmig-compute',
                          {'result': {'status': 'done'}})},
                      lambda nonce: {'failure': refusal}):
            error = self.answered_by_attacker(compute_9, forge)
            self.assertIsInstance(error, exception.ReplyRefused)

        # 4. Replays: a captured message sent again to a process that
        # did not see it: the conductor started again, and compute-2's
        # agent started again.
        begin = self.captured(conductor_topic, 'migration_begin')
        self.cluster.restart('conductor')
        self.cluster.wait_until_registered()
        self.post_as_attacker(begin, 'volmig-conductor', 'volmig')
        self.logged('conductor', ': replayed (logged once')
        self.conductor.stop_instance(self.user, own['uuid'])
        self.wait_for_server(own['uuid'], states.VM_STOPPED)
        stop = self.captured(compute_2_topic, 'stop_instance')
        self.conductor.start_instance(self.user, own['uuid'])
        self.wait_for_server(own['uuid'], states.VM_ACTIVE)
        self.cluster.restart('compute-2')
        self.cluster.wait_until_registered()
        self.post_as_attacker(stop, 'volmig-compute.compute-2')
        self.logged('compute-2', ': replayed (logged once')
        self.assertEqual(states.VM_ACTIVE, self.conductor.instance_get(
            self.admin, own['uuid'])['vm_state'])

        # 5. A timestamp that never ages.
        message = {'method': 'migration_job_ended', 'version': '1.3',
                   'args': {'migration_id': migration['id'],
                            'status': states.COMPLETED, 'pauses': {}}}
        sealed, _ = seals.sign(self.attacker, 'volmig-conductor', None,
                               self.ctxt_dict, message)
        sealed[signing.SIGNATURE]['ts'] = math.nan
        self.post_as_attacker(_oslo_body(message, sealed),
                              'volmig-conductor', 'volmig')
        self.logged('conductor', 'malformed signature')

        # 7. Unsigned, while the conductor lets an upgrade's messages in:
        # an operator's call straight into its queue, and a report on a
        # host that signs.
        self.post_as_attacker(_oslo_body(
            {'method': 'migration_abort', 'version': '1.6',
             'args': {'migration_id': migration['id']}}, self.ctxt_dict),
            'volmig-conductor-operator')
        self.logged('conductor', 'unsigned: not a method the previous '
                                   'release calls')
        error = self.assertRaises(
            exception.MessageRefused,
            self.attacker_client(signed=False).call, self.admin,
            'migration_job_ended', migration_id=migration['id'],
            status=states.COMPLETED, pauses={})
        self.assertIn('reports on its own records only', str(error))

        # 8. Its key revoked: refused at once, with no new master key.
        self.assertEqual(0, self.manage_as('manage', [
            'key', 'revoke', '--service', signing.COMPUTE, '--host',
            'compute-2']).returncode)
        self.wait_until(lambda: _refused(lambda: attacker.call(
            self.admin, 'instance_get', instance_uuid=own['uuid'])),
            what='compute-2 to be refused')

        # Nothing changed, nothing reached volmig-volume...
        self.assertEqual(before, self.state(server, own))
        # ...and compute-1's migration completes, byte-exact.
        self.complete_exactly(server, bdm, vol, writer, number, migration)


def _refused(call):
    """The refusal ``call`` raises, or None while it is answered."""
    try:
        call()
    except exception.MessageRefused as exc:
        return exc
    return None

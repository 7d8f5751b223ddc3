"""Each service speaks systemd's notify protocol on a real socket.

READY=1 must mean "reachable": the test answers READY by sending an RPC
call to the service's own queue at once. A message published before the
queue is consumed is dropped by RabbitMQ, so a READY sent too early makes
that call time out. The heartbeat must be on record by then too.
"""

import os
import signal
import socket

import oslo_messaging as messaging
import requests

from tests.integration import base
from tests.integration import cluster
from volmig import context as volmig_context
from volmig import rpc
from volmig import service
from volmig import signing
from volmig.db import services as service_db

WATCHDOG_USEC = 400000
WAIT = 90


class SystemdNotifyTest(base.ProcessTestCase):

    COMPUTES = 0
    VOLUME_SERVICE = False

    def _socket(self) -> tuple[socket.socket, str]:
        path = os.path.join(self.state_path, 'notify-%d.sock'
                            % len(os.listdir(self.state_path)))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(WAIT)
        self.addCleanup(sock.close)
        return sock, path

    def _spawn(self, binary: str, host: str, options=None):
        sock, path = self._socket()
        config = dict(options or {})
        config[('DEFAULT', 'host')] = host
        if binary in signing.HOSTS:
            # A host's own key, as deployed.
            config[('signing', 'key_file')] = self.cluster.export_key(
                binary, host)
        process = self.cluster.spawn(
            binary, host, cluster.write_config(
                os.path.join(self.state_path, host + '.conf'), config),
            env={'NOTIFY_SOCKET': path,
                 'WATCHDOG_USEC': str(WATCHDOG_USEC)})
        return process, sock

    def _reachable_now(self, topic: str, host: str) -> None:
        """A call to the service's own queue is consumed and dispatched:
        a method no endpoint has comes back as NoSuchMethod."""
        client = rpc.get_client(topic, '1.0', timeout=10)
        try:
            client.prepare(server=host).call(
                volmig_context.get_admin_context(), 'no_such_method')
        except messaging.NoSuchMethod:
            return
        except messaging.RemoteError as exc:
            self.assertEqual('NoSuchMethod', exc.exc_type)
            return
        self.fail('%s on %s answered a method it does not have'
                  % (topic, host))

    def _lifecycle(self, binary: str, topic: str, options=None,
                   at_ready=None) -> list[str]:
        host = 'notify-%s' % binary.split('-')[1]
        process, sock = self._spawn(binary, host, options)
        first = sock.recv(256).decode()
        self.assertEqual('READY=1', first)
        self._reachable_now(topic, host)
        record = service_db.get(volmig_context.get_admin_context(),
                                    binary, host)
        self.assertEqual(topic, record['topic'])
        if at_ready is not None:
            at_ready()
        self.assertEqual('WATCHDOG=1', sock.recv(256).decode())
        process.may_die = True
        process.process.send_signal(signal.SIGTERM)
        after = []
        while not after or after[-1] != 'STOPPING=1':
            after.append(sock.recv(256).decode())
        self.assertEqual(0, process.process.wait(timeout=WAIT))
        with open(process.log_path) as log:
            # Running in the main process is volmig's choice, not a fault.
            self.assertNotIn('no_fork=True', log.read())
        self.assertLessEqual(set(after), {'WATCHDOG=1', 'STOPPING=1'})
        return after

    def test_conductor(self):
        self._lifecycle(service.CONDUCTOR, 'volmig-conductor')

    def test_compute_threading(self):
        self._lifecycle(service.COMPUTE, 'volmig-compute',
                        {('compute', 'driver'): 'fake'})

    def test_compute_eventlet(self):
        # oslo.service's eventlet launcher sends READY=1 itself, early,
        # unless the service has taken NOTIFY_SOCKET first.
        self._lifecycle(service.COMPUTE, 'volmig-compute',
                        {('compute', 'driver'): 'fake',
                         ('DEFAULT', 'concurrency_backend'): 'eventlet'})

    def test_api_serves_rest_at_ready(self):
        port = base.free_port()

        def rest_answers():
            answer = requests.get('http://127.0.0.1:%d/' % port, timeout=10)
            self.assertEqual(200, answer.status_code)

        self._lifecycle(service.API, 'volmig-api',
                        {('api', 'port'): port}, at_ready=rest_answers)

    def test_volume(self):
        self._lifecycle(service.VOLUME, 'volmig-volume',
                        {('volume', 'backend'): 'file',
                         ('storage', 'pools'): 'pool-n:%s' % os.path.join(
                             self.state_path, 'pool-n')})

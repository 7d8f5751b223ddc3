"""A RabbitMQ node of the test's own, beside the machine's broker.

It has its own node name, ports and directories. With ``tls`` it speaks
only TLS, with a CA and a server certificate made for it. With
``command_prefix`` (``ip netns exec NS``) it runs in a network namespace
and listens on ``listen``.
"""

import os
import pwd
import shutil
import signal
import subprocess
import time
import uuid

import fixtures

from tests.integration import base


def _openssl(*args, cwd):
    subprocess.run(['openssl', *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


class BrokerNode(fixtures.Fixture):

    def __init__(self, tls=False, command_prefix=(), listen='127.0.0.1',
                 vhost='/', node=None, peers=()):
        super().__init__()
        self.tls = tls
        self.name = vhost
        self.prefix = list(command_prefix)
        self.listen = listen
        # With ``peers`` (node names, this one's among them) the node
        # forms a cluster with them as they start.
        self.node = node or 'volmigtest%s@localhost' % uuid.uuid4().hex[:8]
        self.peers = peers

    def _setUp(self):
        # Not under the test's nested TMPDIR: its parent is root's alone,
        # and the node runs as the rabbitmq user.
        self.dir = self.useFixture(fixtures.TempDir(rootdir='/tmp')).path
        self.port = base.free_port()
        lines = ['loopback_users = none']
        if self.peers:
            lines.append('cluster_formation.peer_discovery_backend = '
                         'classic_config')
            lines += ['cluster_formation.classic_config.nodes.%d = %s'
                      % (number, peer)
                      for number, peer in enumerate(self.peers, 1)]
        if self.tls:
            self._certificates()
            lines += ['listeners.tcp = none',
                      'listeners.ssl.default = %s:%d' % (self.listen,
                                                         self.port),
                      'ssl_options.cacertfile = %s/ca.pem' % self.dir,
                      'ssl_options.certfile = %s/server.pem' % self.dir,
                      'ssl_options.keyfile = %s/server.key' % self.dir,
                      'ssl_options.verify = verify_none',
                      'ssl_options.fail_if_no_peer_cert = false']
        else:
            lines.append('listeners.tcp.default = %s:%d' % (self.listen,
                                                            self.port))
        with open(os.path.join(self.dir, 'rabbitmq.conf'), 'w') as conf:
            conf.write('\n'.join(lines + ['']))
        with open(os.path.join(self.dir, 'enabled_plugins'), 'w') as plugins:
            plugins.write('[].\n')
        self._give_to_rabbitmq()
        self.env = dict(os.environ,
                        RABBITMQ_NODENAME=self.node,
                        RABBITMQ_DIST_PORT=str(base.free_port()),
                        RABBITMQ_CONFIG_FILE=os.path.join(self.dir,
                                                          'rabbitmq'),
                        RABBITMQ_MNESIA_BASE=os.path.join(self.dir, 'mnesia'),
                        RABBITMQ_LOG_BASE=os.path.join(self.dir, 'log'),
                        RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(
                            self.dir, 'enabled_plugins'),
                        RABBITMQ_PID_FILE=os.path.join(self.dir, 'pid'))
        self.log = os.path.join(self.dir, 'server.log')
        self.addCleanup(self._stop)
        self.start()
        if self.name != '/':
            for command in (('add_vhost', self.name),
                            ('set_permissions', '-p', self.name, 'guest',
                             '.*', '.*', '.*')):
                self.ctl(*command).check_returncode()
        self.url = 'rabbit://guest:guest@%s:%d/%s' % (
            self.listen, self.port, '' if self.name == '/' else self.name)
        self.ca_file = os.path.join(self.dir, 'ca.pem')

    def start(self) -> None:
        """Start the node (again, on its data: it rejoins its cluster)."""
        with open(self.log, 'ab') as log:
            self.process = subprocess.Popen(
                self.prefix + ['rabbitmq-server'], env=self.env, stdout=log,
                stderr=subprocess.STDOUT)
        self._await_startup()

    @property
    def pid_file(self) -> str:
        """Where the node's Erlang VM writes its pid."""
        return self.env['RABBITMQ_PID_FILE']

    def kill(self) -> None:
        """SIGKILL the node's Erlang VM, as a host that dies."""
        with open(self.pid_file) as pid:
            os.kill(int(pid.read()), signal.SIGKILL)
        self.process.wait(timeout=60)

    def ctl(self, *args, timeout=60) -> subprocess.CompletedProcess:
        return subprocess.run(self.prefix + ['rabbitmqctl', '-q', '-n',
                                             self.node, *args],
                              capture_output=True, text=True, env=self.env,
                              timeout=timeout)

    def _await_startup(self, timeout=120):
        # rabbitmqctl gives up at once while the node is not yet known.
        deadline = time.monotonic() + timeout
        while self.ctl('await_startup', '--timeout', '10').returncode:
            if self.process.poll() is not None:
                with open(self.log) as log:
                    raise RuntimeError('the RabbitMQ node exited with %s: %s'
                                       % (self.process.returncode,
                                          log.read()[-2000:]))
            if time.monotonic() > deadline:
                raise RuntimeError('the RabbitMQ node did not start')
            time.sleep(0.5)

    def _certificates(self):
        _openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days',
                 '1', '-subj', '/CN=volmig test CA', '-keyout', 'ca.key',
                 '-out', 'ca.pem', cwd=self.dir)
        _openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj',
                 '/CN=localhost', '-keyout', 'server.key', '-out',
                 'server.csr', cwd=self.dir)
        with open(os.path.join(self.dir, 'san.cnf'), 'w') as san:
            san.write('subjectAltName=DNS:localhost,IP:127.0.0.1\n')
        _openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem',
                 '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1',
                 '-extfile', 'san.cnf', '-out', 'server.pem', cwd=self.dir)

    def _give_to_rabbitmq(self):
        # Debian's rabbitmq-server runs the node as the rabbitmq user.
        try:
            owner = pwd.getpwnam('rabbitmq')
        except KeyError:
            return
        for root, _dirs, files in os.walk(self.dir):
            for name in [root] + [os.path.join(root, f) for f in files]:
                os.chown(name, owner.pw_uid, owner.pw_gid)

    def _stop(self):
        self.ctl('stop', timeout=120)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(os.path.join(self.dir, 'mnesia'), ignore_errors=True)

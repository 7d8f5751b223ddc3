"""A MariaDB Galera cluster of three nodes on this machine, with HAProxy
in front, as kolla-ansible and OpenStack-Ansible deploy one.

Each node has its own datadir and ports. HAProxy has one listener per
writer (``writer(n)``): node n takes every connection while it is up,
the others are its backups. Clients that should write to different
nodes (and so conflict, as Galera certifies their transactions) use
different listeners.
"""

import os
import signal
import subprocess
import time

import fixtures

from tests.integration import base
from tests.integration import haproxy

USER = ('volmig', 'volmig')
PROVIDER = '/usr/lib/galera/libgalera_smm.so'
# Galera evicts a node it has not heard from for evs.suspect_timeout
# (5 s by default); until then every commit waits. Two seconds once the
# cluster is formed, as the operator's docs advise for a cluster on one
# network; at start, with one node copying its data to another, a
# shorter wait made the members suspect each other in turn.
EVICT = ('evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;'
         'evs.inactive_timeout=PT3S')
_NODE = """[mysqld]
user=mysql
datadir={dir}/data
socket={dir}/mysqld.sock
pid-file={dir}/mysqld.pid
log-error={dir}/error.log
port={port}
bind-address=127.0.0.1
skip-name-resolve
performance_schema=OFF
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
character-set-server=utf8mb4
binlog_format=ROW
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider={provider}
wsrep_cluster_name=volmig-test
wsrep_cluster_address=gcomm://{peers}
wsrep_node_name={name}
wsrep_node_address=127.0.0.1:{gcomm}
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:{gcomm};\
ist.recv_addr=127.0.0.1:{ist};gcache.size=32M"
wsrep_sst_receive_address=127.0.0.1:{sst}
wsrep_sst_method=rsync
"""
# Checked every second, every half second while changing; down after
# two failures, and its connections closed, so that clients reconnect
# to the backup rather than wait on a dead peer.
_LISTENER = """
listen writer-{name}
  bind 127.0.0.1:{port}
  option mysql-check user haproxy post-41
{servers}
"""
_SERVER = ('  server {name} 127.0.0.1:{port} check inter 1s fastinter 500 '
           'rise 2 fall 2 on-marked-down shutdown-sessions{backup}')


class Node:

    def __init__(self, root: str, name: str):
        self.name = name
        self.dir = os.path.join(root, name)
        self.port, self.gcomm, self.ist, self.sst = (
            base.free_port() for _ in range(4))
        self.process: subprocess.Popen | None = None

    @property
    def cnf(self) -> str:
        return os.path.join(self.dir, 'my.cnf')

    def sql(self, statement: str) -> str:
        """Run ``statement`` as root over the node's socket."""
        return subprocess.run(
            ['mariadb', '--no-defaults', '-S',
             os.path.join(self.dir, 'mysqld.sock'), '-uroot', '-Nse',
             statement], check=True, capture_output=True, text=True,
            timeout=30).stdout.strip()

    def status(self, name: str) -> str:
        line = self.sql("SHOW STATUS LIKE '%s'" % name)
        return line.partition('\t')[2]


class GaleraCluster(fixtures.Fixture):

    NODES = 3

    def _setUp(self):
        # Not under the test's TMPDIR, whose parents are root's alone:
        # mariadbd runs as the mysql user.
        self.dir = self.useFixture(fixtures.TempDir(rootdir='/tmp')).path
        os.chmod(self.dir, 0o755)
        self.nodes = [Node(self.dir, 'g%d' % n)
                      for n in range(1, self.NODES + 1)]
        peers = ','.join('127.0.0.1:%d' % node.gcomm for node in self.nodes)
        for node in self.nodes:
            os.makedirs(os.path.join(node.dir, 'data'))
            with open(node.cnf, 'w') as cnf:
                cnf.write(_NODE.format(
                    dir=node.dir, port=node.port, provider=PROVIDER,
                    peers=peers, name=node.name, gcomm=node.gcomm,
                    ist=node.ist, sst=node.sst))
        first = self.nodes[0]
        subprocess.run(['chown', '-R', 'mysql:mysql', self.dir], check=True)
        made = subprocess.run(
            ['mariadb-install-db', '--defaults-file=' + first.cnf,
             '--skip-test-db'], capture_output=True, text=True, timeout=120)
        if made.returncode:
            raise RuntimeError('mariadb-install-db failed: %s%s%s'
                               % (made.stdout, made.stderr, self.log(first)))
        self.addCleanup(self._stop_all)
        self.start(first, '--wsrep-new-cluster')
        first.sql("CREATE USER '{0}'@'127.0.0.1' IDENTIFIED BY '{1}'; "
                  "GRANT ALL ON *.* TO '{0}'@'127.0.0.1'; "
                  "CREATE USER 'haproxy'@'127.0.0.1'".format(*USER))
        # Joiners one at a time: each takes a copy of the first's data.
        for node in self.nodes[1:]:
            self.start(node)
        self._haproxy()

    def start(self, node: Node, *args: str) -> None:
        """Start ``node`` (again) and wait until it is synced."""
        node.process = subprocess.Popen(
            ['/usr/sbin/mariadbd', '--defaults-file=' + node.cnf, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            try:
                if node.status('wsrep_local_state_comment') == 'Synced':
                    node.sql("SET GLOBAL wsrep_provider_options='%s'"
                             % EVICT)
                    return
            except subprocess.CalledProcessError:
                pass  # not answering yet
            if node.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('Galera node %s did not sync:\n%s' % (
                    node.name, self.log(node)[-3000:]))
            time.sleep(0.3)

    def kill(self, node: Node) -> None:
        node.process.send_signal(signal.SIGKILL)
        node.process.wait()

    @staticmethod
    def log(node: Node) -> str:
        try:
            with open(os.path.join(node.dir, 'error.log')) as log:
                return log.read()
        except FileNotFoundError:
            return ''

    def _haproxy(self) -> None:
        self.ports = [base.free_port() for _ in self.nodes]
        listeners = []
        for index, node in enumerate(self.nodes):
            order = self.nodes[index:] + self.nodes[:index]
            listeners.append(_LISTENER.format(
                name=node.name, port=self.ports[index],
                servers='\n'.join(_SERVER.format(
                    name=server.name, port=server.port,
                    backup='' if server is node else ' backup')
                    for server in order)))
        self.useFixture(haproxy.HAProxy(
            self.dir, 'defaults\n  mode tcp\n  timeout connect 2s\n'
            '  timeout client 3600s\n  timeout server 3600s\n'
            '  retries 3\n' + ''.join(listeners), self.ports))

    def writer(self, index: int) -> str:
        """The server URL of the listener whose writer is node ``index``
        (0-based) while it is up."""
        return 'mysql+pymysql://%s:%s@127.0.0.1:%d/' % (
            USER + (self.ports[index],))

    def conflicts(self) -> int:
        """Transactions the cluster has given up for a conflict so far,
        summed over the nodes that are up: those that failed Galera's
        certification, and those another node's write aborted."""
        total = 0
        for node in self.nodes:
            if node.process and node.process.poll() is None:
                total += sum(int(node.status(name) or 0) for name in (
                    'wsrep_local_cert_failures', 'wsrep_local_bf_aborts'))
        return total

    def _stop_all(self) -> None:
        for node in self.nodes:
            if node.process:
                haproxy.stop(node.process)

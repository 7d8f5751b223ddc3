"""volmig on three hosts: a controller and two compute hosts, each in a
network namespace of its own, on a bridge.

The controller runs RabbitMQ, volmig-conductor, volmig-api and
volmig-volume; each compute host runs volmig-compute with the qemu driver.
They meet over the network, with the users ``tools/rabbitmq-setup.sh``
makes; the pools are directories all three hosts see (NFS, in a real
deployment). The database is SQLite, or PostgreSQL through its socket.
"""

import os
import socket
import subprocess

import requests
from sqlalchemy.engine import url as sa_url

from tests.integration import broker_node
from tests.integration import netns
from tests.integration import test_qemu_data_path
from volmig import exception
from volmig import states
from volmig.conf import CONF

SKIP = netns.unavailable()
ROOT = os.path.join(os.path.dirname(__file__), '..', '..')
CONTROLLER = 'controller'


def _through_socket(connection: str) -> str:
    """PostgreSQL's TCP port is on this namespace's loopback only; its
    socket is a file, which every namespace sees."""
    url = sa_url.make_url(connection)
    if not url.get_backend_name().startswith('postgresql'):
        return connection
    return url.set(host=None, port=None, query={
        'host': '/var/run/postgresql'}).render_as_string(hide_password=False)


class MultiHostTest(test_qemu_data_path.QemuTestCase):

    COMPUTES = 2

    def setUp(self):
        if SKIP:
            print('multi-host test skipped: %s' % SKIP)
            self.skipTest(SKIP)
        super().setUp()
        port = self.endpoint.rsplit(':', 1)[1]
        self.endpoint = 'http://%s:%s' % (self.net.addresses[CONTROLLER],
                                          port)

    def broker(self):
        self.net = self.useFixture(netns.Network(
            [CONTROLLER, 'compute-1', 'compute-2']))
        self.rabbit = broker_node.BrokerNode(
            command_prefix=self.net.prefix(CONTROLLER),
            listen=self.net.addresses[CONTROLLER], vhost='volmig')
        return self.rabbit

    def options(self):
        options = super().options()
        options[('database', 'connection')] = _through_socket(
            CONF.database.connection)
        options[('api', 'listen')] = self.net.addresses[CONTROLLER]
        return options

    def prefixes(self):
        prefixes = {name: self.net.prefix(CONTROLLER)
                    for name in ('conductor', 'api', 'volume')}
        prefixes.update({host: self.net.prefix(host)
                         for host in ('compute-1', 'compute-2')})
        return prefixes

    def process_options(self):
        """Each controller service, and each host, on its own RabbitMQ
        user."""
        passwords = os.path.join(self.state_path, 'rabbitmq')
        broker = '%s:%d' % (self.net.addresses[CONTROLLER], self.rabbit.port)
        setup = subprocess.run(
            self.net.prefix(CONTROLLER) + [
                'env', 'RABBITMQ_NODENAME=' + self.rabbit.node,
                os.path.join(ROOT, 'tools', 'rabbitmq-setup.sh'), '--vhost',
                'volmig', '--host', broker, '--password-dir', passwords,
                '--compute', 'compute-1', '--compute', 'compute-2',
                '--volume', socket.gethostname()],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, setup.returncode, setup.stderr)
        urls = dict(line.split(': ', 1)
                    for line in setup.stdout.splitlines()[1:])
        options = super().process_options()
        for name, user in (('conductor', 'volmig-conductor'),
                           ('api', 'volmig-api'),
                           ('volume',
                            'volmig-volume.%s' % socket.gethostname()),
                           ('compute-1', 'volmig-compute.compute-1'),
                           ('compute-2', 'volmig-compute.compute-2')):
            options.setdefault(name, {})[('DEFAULT', 'transport_url')] = \
                urls[user]
        return options

    def boot_on(self, host, vol, attach_mode='rw'):
        [server] = self.conductor.build_instances(
            self.user, 'vm', [{'volume_id': vol['id'], 'boot_index': 0,
                               'attach_mode': attach_mode}], 1, host)
        server = self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        self.assertEqual(host, server['host'])
        return server, server['block_devices'][0]

    def open_files(self, server):
        fds = '/proc/%d/fd' % self.qemu_pid(server)
        return {os.path.realpath(os.path.join(fds, fd))
                for fd in os.listdir(fds)}

    def namespace_of(self, pid: int) -> str:
        return subprocess.run(['ip', 'netns', 'identify', str(pid)],
                              capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    def test_a_live_migration_on_each_host(self):
        for name, host in (('conductor', CONTROLLER), ('api', CONTROLLER),
                           ('volume', CONTROLLER), ('compute-1', 'compute-1'),
                           ('compute-2', 'compute-2')):
            self.assertEqual(self.net.namespaces[host], self.namespace_of(
                self.processes[name].process.pid), name)
        runs = []
        for host in ('compute-1', 'compute-2'):
            vol = self.volumes.create_volume(self.admin, 16, pool='pool-a')
            server, _ = self.boot_on(host, vol)
            self.assertEqual(self.net.namespaces[host],
                             self.namespace_of(self.qemu_pid(server)))
            writer = self.writer(server, vol)
            runs.append((vol, writer, self.write_some(writer, 30)))
        for vol, _, _ in runs:
            self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b')
        for _, writer, number in runs:
            self.write_some(writer, 20, number)
        for vol, writer, _ in runs:
            done = self.wait_for_volume(vol['id'], {'success', 'error'})
            self.assertEqual(('success', 'pool-b'),
                             (done['migration_status'], done['pool']),
                             done.get('migration_error'))
            self.assert_image(done['path'], writer)
        answer = requests.get(self.endpoint + '/os-services', timeout=30,
                              headers={'X-Auth-Token': 'admin:admin'})
        self.assertEqual(
            {('compute-1', 'up'), ('compute-2', 'up')},
            {(s['host'], s['state']) for s in answer.json()['services']
             if s['binary'] == 'volmig-compute'})

    def test_a_shared_volume_across_hosts(self):
        """The seeds: read/write on two hosts is never migrated live;
        read-only on two hosts moves live, both guests switch."""
        shared = self.volumes.create_volume(self.admin, 16, pool='pool-a',
                                            multiattach=True)
        bdms = [self.boot_on(host, shared)[1]
                for host in ('compute-1', 'compute-2')]
        exc = self.assertRaises(exception.MultiattachMigrationNotSupported,
                                self.client.start, self.ctxt,
                                bdms[0]['attachment_id'])
        self.assertIn('at least one is read/write', str(exc))

        readonly = self.volumes.create_volume(self.admin, 16, pool='pool-a',
                                              multiattach=True)
        with open(readonly['path'], 'r+b') as data:
            data.write(os.urandom(4 * 1024 * 1024))
        with open(readonly['path'], 'rb') as data:
            content = data.read()
        servers = [self.boot_on(host, readonly, 'ro')[0]
                   for host in ('compute-1', 'compute-2')]
        self.volumes.migrate_volume(self.admin, readonly['id'], 'pool-b')
        moved = self.wait_for_volume(readonly['id'], {'success', 'error'})
        self.assertEqual('success', moved['migration_status'],
                         moved.get('migration_error'))
        with open(moved['path'], 'rb') as data:
            self.assertEqual(content, data.read())
        for server in servers:
            files = self.open_files(server)
            self.assertIn(os.path.realpath(moved['path']), files)
            self.assertNotIn(os.path.realpath(readonly['path']), files)

    def test_a_compute_host_cut_off_mid_migration(self):
        vol = self.volumes.create_volume(self.admin, 16, pool='pool-a')
        server, bdm = self.boot_on('compute-1', vol)
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.net.cut('compute-1')
        # The guest runs on, on its overlay, while its host is away.
        number = self.write_some(writer, 20, number)
        self.wait_until(lambda: not self._compute_up('compute-1'),
                        timeout=60, what='compute-1 to be seen down')
        dst, attachment = self.copy_to_dst(server, bdm, vol)
        number = self.write_some(writer, 20, number)
        self.net.restore('compute-1')
        self.wait_until(lambda: self._compute_up('compute-1'), timeout=90,
                        what='compute-1 to be back')
        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'])
        number = self.write_some(writer, 20, number)
        done = self.client.wait_for(self.ctxt, migration['id'],
                                    states.COMPLETED)
        self.assertFalse(done['recovery_needed'])
        self.write_some(writer, 10, number)
        self.assert_image(dst['path'], writer)

    def _compute_up(self, host) -> bool:
        return any(s['host'] == host and s['is_up']
                   for s in self.conductor.service_get_all(self.admin,
                                                           'volmig-compute'))

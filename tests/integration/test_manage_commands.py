"""Every volmig-manage subcommand as a process: against no deployment at
all (one line, exit 1, never a traceback), and against one that answers.

Live, the commands of the database, images, volumes and pools are run
here; those of migrations and servers in ``test_operator_recovery``, and
of services in ``test_operator_tools``.
"""

from concurrent import futures
import os
import socket
import subprocess
import time

import fixtures
from oslotest import base as oslo_base

from tests.integration import base
from tests.integration import cluster
from volmig.cmd import manage
from volmig.conf import CONF
from volmig.signing import keys as signing_keys
from volmig.volume_service import rpcapi as storage_rpcapi

MANAGE = os.path.join(cluster.BIN_DIR, 'volmig-manage')
SOME_ID = '5d4c9a53-6c8f-4e0e-9d6e-1f1f3c2b7a10'
# Each subcommand with arguments it accepts.
ARGUMENTS = {
    ('db', 'sync'): ['db', 'sync'],
    ('db', 'version'): ['db', 'version'],
    ('image', 'register'): ['image', 'register', 'tiny', '--disk',
                            '/nonexistent/disk'],
    ('image', 'list'): ['image', 'list'],
    ('image', 'delete'): ['image', 'delete', 'tiny'],
    ('volume', 'list'): ['volume', 'list'],
    ('volume', 'migrate'): ['volume', 'migrate', SOME_ID, '--to', 'pool-b'],
    ('pool', 'drain'): ['pool', 'drain', 'pool-a', '--to', 'pool-b'],
    ('pool', 'show'): ['pool', 'show', 'pool-a'],
    ('pool', 'cancel-drain'): ['pool', 'cancel-drain', 'pool-a'],
    ('migration', 'list'): ['migration', 'list'],
    ('migration', 'show'): ['migration', 'show', SOME_ID],
    ('migration', 'recover'): ['migration', 'recover', SOME_ID],
    ('migration', 'abort'): ['migration', 'abort', SOME_ID],
    ('server', 'reset-state'): ['server', 'reset-state', SOME_ID],
    ('service', 'list'): ['service', 'list'],
    ('service', 'disable'): ['service', 'disable', 'volmig-compute', 'h1'],
    ('service', 'enable'): ['service', 'enable', 'volmig-compute', 'h1'],
    ('service', 'delete'): ['service', 'delete', 'volmig-compute', 'h1'],
    ('key', 'create'): ['key', 'create'],
    ('key', 'rotate'): ['key', 'rotate', '--window', '60'],
    ('key', 'export'): ['key', 'export', '--service', 'volmig-compute',
                        '--host', 'h1', '--to', '/nonexistent/key.json'],
    ('key', 'revoke'): ['key', 'revoke', '--service', 'volmig-compute',
                        '--host', 'h1'],
    ('key', 'list'): ['key', 'list'],
}
# They read nothing but the compute host's image directory.
LOCAL = {('image', 'list')}


def run(config_file, args):
    return subprocess.run([MANAGE, '--config-file', config_file, *args],
                          capture_output=True, text=True, timeout=120,
                          check=False)


class WithoutDeploymentTest(oslo_base.BaseTestCase):

    def test_every_subcommand_fails_in_one_line(self):
        self.assertEqual(set(manage._COMMANDS), set(ARGUMENTS))
        directory = self.useFixture(fixtures.TempDir()).path
        config_file = os.path.join(directory, 'volmig.conf')
        with open(config_file, 'w') as conf:
            # Nothing listens on port 1; the database's directory is
            # missing.
            conf.write('[DEFAULT]\ntransport_url = '
                       'rabbit://guest:guest@127.0.0.1:1/\n'
                       'rpc_response_timeout = 5\n[database]\n'
                       'connection = sqlite:///%s/missing/volmig.sqlite\n'
                       '[qemu]\nimage_dir = %s/images\n'
                       '[signing]\nkey_file = %s/missing/key.json\n'
                       % (directory, directory, directory))
        with futures.ThreadPoolExecutor(len(ARGUMENTS)) as pool:
            results = dict(zip(ARGUMENTS, pool.map(
                lambda args: run(config_file, args), ARGUMENTS.values()),
                strict=True))
        for command, result in sorted(results.items()):
            self.assertNotIn('Traceback', result.stdout + result.stderr)
            if command in LOCAL:
                self.assertEqual((0, ''), (result.returncode,
                                           result.stderr), command)
                continue
            self.assertEqual(1, result.returncode, command)
            [line] = result.stderr.splitlines()
            self.assertTrue(line.startswith('error: '), (command, line))
        self.assertIn('cannot reach RabbitMQ ([DEFAULT] transport_url) at '
                      '127.0.0.1:1', results['volume', 'list'].stderr)
        self.assertIn('the database ([database] connection) failed',
                      results['db', 'version'].stderr)
        self.assertEqual('error: Image tiny could not be found.\n',
                         results['image', 'delete'].stderr)
        for action in ('rotate', 'export'):
            self.assertIn('volmig-manage key create',
                          results['key', action].stderr)


class LiveTest(base.ProcessTestCase):
    COMPUTES = 1
    VOLUME_SERVICE = True

    def options(self):
        return {('volume', 'backend'): 'file',
                ('storage', 'pools'): self.pools(),
                ('qemu', 'image_dir'): os.path.join(self.state_path,
                                                    'images')}

    def manage(self, *args):
        result = run(self.cluster.config_file, args)
        self.assertNotIn('Traceback', result.stdout + result.stderr)
        self.assertEqual(0, result.returncode, result.stderr)
        return result.stdout

    def test_database_images_volumes_and_pools(self):
        revision = self.manage('db', 'version').strip()
        self.assertEqual('Database is at revision %s\n' % revision,
                         self.manage('db', 'sync'))
        disk = os.path.join(self.state_path, 'tiny.raw')
        with open(disk, 'wb') as handle:
            handle.truncate(1024 * 1024)
        self.assertIn('image tiny registered',
                      self.manage('image', 'register', 'tiny', '--disk',
                                  disk))
        self.assertIn('tiny ', self.manage('image', 'list'))
        self.assertEqual('image tiny deleted\n',
                         self.manage('image', 'delete', 'tiny'))
        self.assertNotIn('tiny ', self.manage('image', 'list'))
        volume = storage_rpcapi.StorageAPI().create_volume(
            self.admin, 16, pool='pool-a')
        [row] = [line for line in self.manage('volume', 'list').splitlines()
                 if line.startswith(volume['id'])]
        self.assertIn('pool-a', row)
        moved = self.manage('volume', 'migrate', volume['id'], '--to',
                            'pool-b', '--wait')
        self.assertIn('volume %s is in pool pool-b' % volume['id'], moved)
        drained = self.manage('pool', 'drain', 'pool-b', '--to', 'pool-a',
                              '--wait')
        self.assertIn(volume['id'], drained)
        self.assertIn(volume['id'], self.manage('pool', 'show', 'pool-b'))
        self.assertEqual('pool-a', self.volumes.get_volume(
            self.admin, volume['id'])['pool'])
        # The drain is over: nothing to cancel, and it says so.
        refused = run(self.cluster.config_file,
                      ['pool', 'cancel-drain', 'pool-b'])
        self.assertEqual((1, 'error: Pool pool-b has no drain running.\n'),
                         (refused.returncode, refused.stderr))

    def test_keys_rotate_while_every_service_runs(self):
        """A new master key and the hosts' keys exported again, with no
        service restarted: past the window the old key is refused, and
        the agent and volmig-volume still speak with the conductor."""
        # Long enough for every export below, on a busy machine.
        rotated = self.manage('key', 'rotate', '--window', '15')
        self.assertIn('key 2 signs from', rotated)
        for service, host in (('volmig-compute', 'compute-1'),
                              ('volmig-volume', socket.gethostname())):
            self.manage('key', 'export', '--service', service, '--host',
                        host, '--same-generation', '--to',
                        self.cluster.key_path(service, host))
        _, keys = signing_keys.read(CONF.signing.key_file)
        [old] = [key for key in keys if key.id == 1]
        # Past the old key's end: every message is signed with key 2.
        self.wait_until(lambda: time.time() > old.expires + 2, timeout=60,
                        what='the old key to expire')
        # The conductor and the agent, both ways, and volmig-volume.
        self.create_server(host='compute-1')
        listed = self.manage('service', 'list')
        for binary in ('volmig-compute', 'volmig-volume'):
            [row] = [line for line in listed.splitlines() if binary in line]
            self.assertIn(' up', row)
        # No message was refused on the way: each service took up the
        # new key as its file changed.
        for name in ('conductor', 'api', 'compute-1', 'volume'):
            with open(self.cluster.processes[name].log_path) as log:
                self.assertNotIn('Refused RPC', log.read(), name)

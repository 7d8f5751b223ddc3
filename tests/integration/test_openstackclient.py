"""openstackclient with volmig's plugin, as an operator installs it: its
own venv (``.venv-osc``, into which bootstrap pip-installs volmig), a real
Keystone, and credentials in clouds.yaml. A tenant creates her volume
and boots a real guest that writes to it; the operator moves it live
with ``openstack volume migration start`` and drains its pool back with
``openstack volume pool drain``. Each move ends byte-exact: every write
the guest acknowledged is on the volume's file in its new pool.
"""

import hashlib
import json
import os
import subprocess

import fixtures
import requests
import testtools
import yaml

from tests import openstack
from tests.integration import base
from tests.integration import real_guest_base

OPENSTACK = os.path.join(openstack.ROOT, '.venv-osc', 'bin', 'openstack')
MIB = 1024 * 1024


@testtools.skipUnless(
    os.path.exists(os.path.join(openstack.KEYSTONE_VENV, 'bin', 'gunicorn'))
    and os.path.exists(OPENSTACK),
    '.venv-keystone or .venv-osc is missing: run tools/bootstrap.sh')
class OpenStackClientTest(base.DeployedOnceTestCase,
                          real_guest_base.RealGuestTestCase):
    COMPUTES = 1

    @classmethod
    def deploy(cls, deployment):
        keystone = cls.keystone = deployment.useFixture(openstack.Keystone())
        keystone.service_user('volmig')
        project = keystone.project('alpha')
        keystone.user('alice', project, ['member'])
        keystone.user('olga', project, ['admin'])
        # openstackclient finds volmig-api in the catalog.
        keystone.register('compute', cls.compute_url())
        cls.clouds = os.path.join(deployment.useFixture(
            fixtures.TempDir()).path, 'clouds.yaml')
        with open(cls.clouds, 'w') as out:
            yaml.safe_dump({'clouds': {user: {'auth': {
                'auth_url': keystone.url, 'username': user,
                'password': openstack.SERVICE_PASSWORD,
                'user_domain_id': 'default', 'project_id': project}}
                for user in ('alice', 'olga')}}, out)
        cls.admin_token = keystone.token('olga', project)

    def process_options(self):
        return dict(super().process_options(),
                    api=self.keystone.authtoken_options())

    def rest(self, method, path, body=None, token=None):
        # The base class's checks, with the operator's Keystone token.
        response = requests.request(
            method, self.endpoint + path, json=body, timeout=60,
            headers={'X-Auth-Token': self.admin_token,
                     'OpenStack-API-Version': 'compute 2.61'})
        self.assertNotIn(response.status_code, range(500, 600),
                         response.text)
        return response.status_code, (response.json() if response.content
                                      else None)

    def openstack(self, cloud, *args):
        """``openstack --os-cloud CLOUD ARGS`` as a process, with nothing
        of this process's environment that configures a client:
        (exit code, standard output, standard error)."""
        home = self.useFixture(fixtures.TempDir()).path
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(('OS_', 'VOLMIG_'))}
        result = subprocess.run(  # nosec B603
            [OPENSTACK, '--os-cloud', cloud, *args], capture_output=True,
            text=True, timeout=300, check=False,
            env=dict(env, HOME=home, OS_CLIENT_CONFIG_FILE=self.clouds))
        self.assertNotIn('Traceback', result.stderr)
        return result.returncode, result.stdout, result.stderr

    def json(self, cloud, *args):
        code, out, err = self.openstack(cloud, *args, '-f', 'json')
        self.assertEqual(0, code, err)
        return json.loads(out)

    def test_a_tenants_volume_moved_live_and_drained_back(self):
        # The tenant's own volume and server, through the plugin.
        volume = self.json('alice', 'volmig', 'volume', 'create', 'data',
                           '--size-mb', '16', '--pool', 'pool-a')
        [server] = self.json('alice', 'volmig', 'server', 'create', 'vm',
                             '--image', 'volmig-guest', '--volume', 'data')
        self.wait_for_status(server['ID'], 'ACTIVE')
        self.wait_for_acks(server['ID'], volume['id'], 20)

        # The operator moves it live, and watches it to its end.
        code, out, err = self.openstack(
            'olga', 'volume', 'migration', 'start', 'data', '--to', 'pool-b',
            '--wait', '--poll-interval', '0.2', '-f', 'json')
        self.assertEqual(0, code, err)
        [migration] = json.loads(out)
        self.assertEqual(server['ID'], migration['Server ID'])
        self.assertIn('Volume %s is in pool pool-b.' % volume['id'], err)
        self.assert_moved(server['ID'], volume, 'pool-b',
                          'openstack volume migration start')
        [listed] = self.json('olga', 'volume', 'migration', 'list',
                             '--volume', volume['id'], '--long')
        # --long adds the progress of the overlay's commit into dst.
        self.assertEqual((migration['ID'], 'completed', listed['Bytes Total']),
                         (listed['ID'], listed['Status'],
                          listed['Bytes Done']))
        self.assertEqual('compute-1', self.json(
            'olga', 'volume', 'migration', 'show', migration['ID'])['host'])

        # A detached volume of random data beside it, and the pool drained
        # back: the plan first, then the drain, to its end.
        spare = self.json('olga', 'volmig', 'volume', 'create', 'spare',
                          '--size-mb', '8', '--pool', 'pool-b')
        content = os.urandom(8 * MIB)
        with open(self.path(spare['id']), 'r+b') as handle:
            handle.write(content)
        plan = self.json('olga', 'volume', 'pool', 'drain', 'start',
                         'pool-b', '--to', 'pool-a', '--dry-run')
        self.assertEqual({'data': 'live', 'spare': 'copy'},
                         {row['Name']: row['Action'] for row in plan})
        code, out, err = self.openstack(
            'olga', 'volume', 'pool', 'drain', 'start', 'pool-b', '--to',
            'pool-a', '--max-parallel', '2', '--wait', '--poll-interval',
            '0.2', '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual({'done'}, {row['State'] for row in json.loads(out)})
        self.assertIn('completed: 2/2 volumes, 24/24 MiB', err)
        self.assert_moved(server['ID'], volume, 'pool-a',
                          'openstack volume pool drain start')
        with open(self.path(spare['id']), 'rb') as handle:
            self.assertEqual(hashlib.sha256(content).hexdigest(),
                             hashlib.sha256(handle.read()).hexdigest())
        self.assertEqual(['completed'], [drain['Status'] for drain in
                                         self.json('olga', 'volume', 'pool',
                                                   'drain', 'list',
                                                   'pool-b')])
        self.assertEqual([], os.listdir(os.path.join(self.state_path,
                                                     'pool-b')))

        # Refusals: one plain line each, the API's reason in it.
        for cloud, args, reason in (
                ('olga', ('volume', 'pool', 'drain', 'cancel', 'pool-b'),
                 'pool-b'),
                ('alice', ('volume', 'pool', 'drain', 'start', 'pool-a',
                           '--to', 'pool-b'), '403'),
                ('olga', ('--os-volume-migration-api-version', '2.90',
                          'volume', 'migration', 'list'),
                 "'2.90' is not one of 2.1 to 2.89")):
            code, out, err = self.openstack(cloud, *args)
            self.assertEqual(1, code, out)
            self.assertIn(reason, err.strip().splitlines()[-1])

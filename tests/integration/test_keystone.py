"""volmig-api behind keystonemiddleware on a real Keystone: what each
persona's token may do, project scoping, an expired token, and the volmig
CLI authenticating as openstackclient does."""

import datetime
import os
import subprocess
import time

import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
import requests
import testtools
import yaml

from tests import openstack
from tests.integration import base
from tests.integration import cluster
from volmig import states

# Seconds a token lives here: long enough to make one and use it, short
# enough to wait out.
TOKEN_LIFE = 10


@testtools.skipUnless(
    os.path.exists(os.path.join(openstack.KEYSTONE_VENV, 'bin', 'gunicorn')),
    '.venv-keystone has no gunicorn: run tools/bootstrap.sh')
class KeystoneAuthTest(base.DeployedOnceTestCase):
    COMPUTES = 1

    @classmethod
    def deploy(cls, deployment):
        keystone = cls.keystone = deployment.useFixture(
            openstack.Keystone(token_expiration=TOKEN_LIFE))
        keystone.service_user('volmig')
        cls.projects = {name: keystone.project(name)
                        for name in ('alpha', 'beta')}
        cls.alice = keystone.user('alice', cls.projects['alpha'],
                                  ['member'])
        keystone.user('bob', cls.projects['beta'], ['member'])
        keystone.user('olga', cls.projects['alpha'], ['admin'])
        keystone.user('cinder', keystone.service_project, ['service'])
        # The CLI finds volmig-api in the catalog.
        keystone.register('compute', cls.compute_url())

    def process_options(self):
        return {'api': self.keystone.authtoken_options()}

    def api(self, method, path, token, body=None):
        return requests.request(method, self.endpoint + path, json=body,
                                timeout=60, headers={'X-Auth-Token': token})

    def token(self, user, project='alpha'):
        return self.keystone.token(user, self.projects.get(
            project, self.keystone.service_project))

    def test_each_persona_within_its_project(self):
        alice = self.token('alice')
        created = self.api('POST', '/servers', alice,
                           {'server': {'name': 'vm'}})
        self.assertEqual(202, created.status_code, created.text)
        server = created.json()['server']['id']
        self.wait_for_server(server, states.VM_ACTIVE)
        # alice's project sees it; bob's, another project, does not.
        self.assertEqual([server], [s['id'] for s in self.api(
            'GET', '/servers', alice).json()['servers']])
        bob = self.token('bob', 'beta')
        self.assertEqual([], self.api('GET', '/servers',
                                      bob).json()['servers'])
        self.assertEqual(404, self.api('GET', '/servers/%s' % server,
                                       bob).status_code)
        self.assertEqual(404, self.api('DELETE', '/servers/%s' % server,
                                       bob).status_code)
        # Operators' views need admin; a member is refused by policy.
        refused = self.api('GET', '/os-services', alice)
        self.assertEqual(403, refused.status_code)
        self.assertIn('volmig:os-services:list', refused.text)
        olga = self.token('olga')
        self.assertEqual(200, self.api('GET', '/os-services',
                                       olga).status_code)
        # The swap is the block-storage service's: a member is refused, a
        # service user gets past policy to the request's own errors.
        swap = ('/servers/%s/os-volume_attachments/%s'
                % (server, '5d4c9a53-6c8f-4e0e-9d6e-1f1f3c2b7a10'))
        body = {'volumeAttachment': {
            'volumeId': '0b9e6b7a-3d7e-4d65-9a5c-2f1f3c2b7a11'}}
        self.assertEqual(403, self.api('PUT', swap, alice,
                                       body).status_code)
        service = self.api('PUT', swap, self.token('cinder', 'service'),
                           body)
        self.assertEqual(404, service.status_code, service.text)

    def test_a_token_past_its_expiry_is_refused(self):
        # A token refused before its expiry fails the test. One that a
        # loaded machine brought to the API only after its expiry proves
        # nothing either way, so another is taken.
        for _attempt in range(3):
            access = self.keystone.access('alice', self.projects['alpha'])
            fresh = self.api('GET', '/servers', access.auth_token)
            if fresh.status_code == 200 or not self.past(access.expires):
                break
        self.assertEqual(200, fresh.status_code, fresh.text)
        # A second over: Keystone may keep the expiry to the second.
        while not self.past(access.expires + datetime.timedelta(seconds=1)):
            time.sleep(0.5)
        expired = self.api('GET', '/servers', access.auth_token)
        self.assertEqual(401, expired.status_code, expired.text)
        self.assertEqual(200, self.api('GET', '/servers',
                                       self.token('alice')).status_code)

    @staticmethod
    def past(moment):
        return datetime.datetime.now(datetime.UTC) > moment

    def volmig(self, *args, **env):
        """The CLI as a process, with only the credentials in ``env``."""
        home = self.useFixture(fixtures.TempDir()).path
        clean = {key: value for key, value in os.environ.items()
                 if not key.startswith(('OS_', 'VOLMIG_'))}
        return subprocess.run(
            [os.path.join(cluster.BIN_DIR, 'volmig'), *args],
            capture_output=True, text=True, timeout=60, check=False,
            env=dict(clean, HOME=home, **env))

    def servers_seen(self, *args, **env):
        result = self.volmig(*args, 'server', 'list', '-f', 'value', '-c',
                             'ID', **env)
        self.assertEqual(0, result.returncode, result.stderr)
        return result.stdout.split()

    def test_the_cli_authenticates_as_openstackclient_does(self):
        created = self.api('POST', '/servers', self.token('alice'),
                           {'server': {'name': 'vm'}})
        self.assertEqual(202, created.status_code, created.text)
        server = created.json()['server']['id']
        password = {'auth_url': self.keystone.url,
                    'user_domain_id': 'default',
                    'password': openstack.SERVICE_PASSWORD}
        # clouds.yaml and --os-cloud.
        clouds = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'clouds.yaml')
        with open(clouds, 'w') as out:
            yaml.safe_dump({'clouds': {'alpha': {'auth': dict(
                password, username='alice',
                project_id=self.projects['alpha'])}}}, out)
        self.assertEqual([server], self.servers_seen(
            '--os-cloud', 'alpha', OS_CLIENT_CONFIG_FILE=clouds))
        # The OS_* variables, as another project's member.
        self.assertEqual([], self.servers_seen(
            OS_AUTH_URL=self.keystone.url, OS_USERNAME='bob',
            OS_PASSWORD=openstack.SERVICE_PASSWORD,
            OS_USER_DOMAIN_ID='default', OS_PROJECT_ID=self.projects['beta']))
        # An application credential of alice's.
        alice = ks_session.Session(auth=v3.Password(
            username='alice', project_id=self.projects['alpha'], **password))
        credential = alice.post(
            '%s/users/%s/application_credentials' % (self.keystone.url,
                                                      self.alice['id']),
            json={'application_credential': {'name': 'volmig-cli'}}).json()[
                'application_credential']
        self.assertEqual([server], self.servers_seen(
            OS_AUTH_TYPE='v3applicationcredential',
            OS_AUTH_URL=self.keystone.url,
            OS_APPLICATION_CREDENTIAL_ID=credential['id'],
            OS_APPLICATION_CREDENTIAL_SECRET=credential['secret']))
        # A wrong password: Keystone's refusal, in one line.
        refused = self.volmig(
            'server', 'list', OS_AUTH_URL=self.keystone.url,
            OS_USERNAME='alice', OS_PASSWORD='wrong',
            OS_USER_DOMAIN_ID='default',
            OS_PROJECT_ID=self.projects['alpha'])
        self.assertEqual(1, refused.returncode)
        [line] = refused.stderr.splitlines()
        self.assertIn('401', line)

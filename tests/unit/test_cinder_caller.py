"""Who volmig is in Cinder: the user whose request it serves, or itself.

The requests themselves are the integration tests' (real Keystone and
Cinder); these check the choice, and what carries it across RPC.
"""

import json

import fixtures
from keystoneauth1 import service_token
from oslo_config import cfg
from oslotest import base

from volmig import context
from volmig import rpc
from volmig.block_storage import cinder
from volmig.conf import cinder as cinder_conf

CINDER_URL = 'http://cinder.example:8776/v3/tenant-a-id'
# keystonemiddleware's X-Service-Catalog: v2-shaped, the project
# substituted.
CATALOG = [
    {'type': 'volumev3', 'name': 'cinderv3', 'endpoints': [
        {'region': 'RegionOne', 'publicURL': CINDER_URL,
         'internalURL': CINDER_URL, 'adminURL': CINDER_URL}]},
    {'type': 'compute', 'name': 'volmig', 'endpoints': [
        {'region': 'RegionOne',
         'publicURL': 'http://volmig.example/v2.1'}]}]


def user_context(roles=('member', 'reader'), token='user-token'):
    return context.RequestContext.from_environ({
        'HTTP_X_AUTH_TOKEN': token, 'HTTP_X_USER_ID': 'alice',
        'HTTP_X_PROJECT_ID': 'tenant-a-id', 'HTTP_X_ROLES': ','.join(roles),
        'HTTP_X_SERVICE_CATALOG': json.dumps(CATALOG)})


class CallerContextTest(base.BaseTestCase):

    def test_the_block_storage_catalog_crosses_rpc_with_the_token(self):
        ctxt = user_context()
        # Only what reaches Cinder: a whole catalog is large.
        self.assertEqual(['volumev3'],
                         [entry['type'] for entry in ctxt.service_catalog])
        serializer = rpc.RequestContextSerializer()
        received = serializer.deserialize_context(json.loads(json.dumps(
            serializer.serialize_context(ctxt))))
        self.assertEqual((ctxt.auth_token, ctxt.service_catalog),
                         (received.auth_token, received.service_catalog))

    def test_for_volmig_drops_the_callers_token_and_catalog(self):
        ctxt = user_context(roles=('admin', 'service'))
        own = ctxt.for_volmig()
        self.assertEqual((None, []), (own.auth_token, own.service_catalog))
        self.assertEqual((ctxt.request_id, ctxt.project_id, ctxt.roles),
                         (own.request_id, own.project_id, own.roles))
        # The caller's context is left as it was.
        self.assertEqual('user-token', ctxt.auth_token)


class CinderAdapterTest(base.BaseTestCase):

    def adapter(self, auth_type='password'):
        options = {'auth_type': auth_type}
        if auth_type == 'password':
            options.update(auth_url='http://keystone.example/v3',
                           username='volmig', password='secret',
                           user_domain_id='default', project_name='service',
                           project_domain_id='default')
        else:
            options['endpoint_override'] = CINDER_URL
        # A file: keystoneauth registers a plugin's options as it loads it.
        path = self.useFixture(fixtures.TempDir()).join('volmig.conf')
        with open(path, 'w') as config:
            config.write('[cinder]\n' + ''.join(
                '%s = %s\n' % item for item in options.items()))
        conf = cfg.ConfigOpts()
        # A group of this test's own: keystoneauth registers the loaded
        # plugin's options (auth_url required) in the group object, and
        # the module's is every ConfigOpts' in this process.
        conf.register_group(cfg.OptGroup(cinder_conf.GROUP))
        cinder_conf.register_opts(conf)
        conf(['--config-file', path], default_config_files=[])
        return cinder.CinderVolumeAdapter(conf)

    def test_a_users_request_goes_with_its_token_and_volmigs(self):
        adapter = self.adapter()
        auth = adapter._cinder(user_context()).client.auth
        self.assertIsInstance(auth, service_token.ServiceTokenAuthWrapper)
        self.assertEqual('user-token', auth.user_auth.get_token(None))
        self.assertIs(adapter._auth, auth.service_auth)
        # Cinder as the user's own catalog names it.
        self.assertEqual(CINDER_URL, auth.get_endpoint(
            None, service_type='volumev3', interface='public'))
        self.assertEqual({}, adapter._all_projects(user_context()))

    def test_an_admin_user_lists_every_project(self):
        adapter = self.adapter()
        admin = user_context(roles=('admin', 'member'))
        admin.is_admin = True
        self.assertEqual({'all_tenants': 1}, adapter._all_projects(admin))

    def test_volmigs_own_work_uses_its_own_credentials_on_all_projects(self):
        adapter = self.adapter()
        for ctxt in (context.get_admin_context(),
                     context.get_service_context(),
                     user_context().for_volmig()):
            self.assertIs(adapter._own, adapter._cinder(ctxt))
            self.assertEqual({'all_tenants': 1}, adapter._all_projects(ctxt))

    def test_without_keystone_there_is_no_user_to_act_for(self):
        adapter = self.adapter('none')
        self.assertIs(adapter._own, adapter._cinder(user_context()))

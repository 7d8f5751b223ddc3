"""Generated request bodies against every REST schema: never a 5xx.

Bodies valid per schema (hypothesis-jsonschema), and arbitrary JSON,
go to the real app over real in-process services. Each answer is below
500, Nova-shaped, and carries no traceback.
"""

import hypothesis
from hypothesis import strategies as st
import hypothesis_jsonschema
from oslo_serialization import jsonutils
from oslotest import base
import webob

from tests.functional import api_fixtures
from tests.functional import test_malformed_rpc
from volmig.api.rest import app
from volmig.api.rest.schemas import attachments
from volmig.api.rest.schemas import migrations
from volmig.api.rest.schemas import servers
from volmig.api.rest.schemas import volumes

SETTINGS = hypothesis.settings(
    max_examples=15, deadline=None, derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck))
UNKNOWN = '0b9c2a6e-7f6d-4c43-9d83-2f4f1d2c0a11'


def bodies(schema: dict):
    """Bodies valid per ``schema``."""
    return hypothesis_jsonschema.from_schema(schema)  # type: ignore



class APIFuzzTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.fixture = api_fixtures.APIFixture()
        self.fixture.start_fixture()
        self.addCleanup(self.fixture.stop_fixture)
        self.app = app.build()
        volume = self.request('POST', '/os-volumes', {'volume': {
            'size_mb': 8, 'multiattach': True}})['volume']
        self.volume_id = volume['id']
        self.server_id = self.request('POST', '/servers', {'server': {
            'name': 'target'}})['server']['id']
        self.paths = {
            'servers': ('POST', '/servers'),
            'server_action': ('POST', '/servers/%s/action'
                              % self.server_id),
            'attach': ('POST', '/servers/%s/os-volume_attachments'
                       % self.server_id),
            'swap': ('PUT', '/servers/%s/os-volume_attachments/%s'
                     % (self.server_id, self.volume_id)),
            'volumes': ('POST', '/os-volumes'),
            'volume_action': ('POST', '/os-volumes/%s/action'
                              % self.volume_id),
            'migration_action': ('POST', '/os-volume-migrations/%s/action'
                                 % UNKNOWN),
        }

    def request(self, method, path, body, expect_ok=True):
        request = webob.Request.blank(
            '/v2.1' + path, method=method,
            headers={'X-Auth-Token': 'admin:admin',
                     'OpenStack-API-Version': 'compute 2.61',
                     'Content-Type': 'application/json'},
            body=jsonutils.dump_as_bytes(body))
        response = request.get_response(self.app)
        self.assertLess(response.status_int, 500, response.text)
        self.assertNotIn('Traceback', response.text)
        if response.status_int >= 400:
            (fault,) = response.json.values()
            self.assertEqual(response.status_int, fault['code'])
            self.assertTrue(fault['message'])
        elif expect_ok:
            return response.json if response.body else None
        return None

    def _fuzz(self, name, body):
        method, path = self.paths[name]
        self.request(method, path, body, expect_ok=False)

    @SETTINGS
    @hypothesis.given(body=bodies(servers.create_v261))
    def test_server_create(self, body):
        self._fuzz('servers', body)

    @SETTINGS
    @hypothesis.given(body=bodies(servers.action))
    def test_server_action(self, body):
        self._fuzz('server_action', body)

    @SETTINGS
    @hypothesis.given(body=bodies(attachments.create_v261))
    def test_attach(self, body):
        self._fuzz('attach', body)

    @SETTINGS
    @hypothesis.given(body=bodies(attachments.update))
    def test_swap(self, body):
        self._fuzz('swap', body)

    @SETTINGS
    @hypothesis.given(body=bodies(volumes.create))
    def test_volume_create(self, body):
        self._fuzz('volumes', body)

    @SETTINGS
    @hypothesis.given(body=bodies(volumes.action))
    def test_volume_action(self, body):
        self._fuzz('volume_action', body)

    @SETTINGS
    @hypothesis.given(body=bodies(migrations.action))
    def test_migration_action(self, body):
        self._fuzz('migration_action', body)

    @SETTINGS
    @hypothesis.given(name=st.sampled_from(
        ['servers', 'server_action', 'attach', 'swap', 'volumes',
         'volume_action', 'migration_action']),
        body=test_malformed_rpc.JSON)
    def test_any_json_anywhere(self, name, body):
        self._fuzz(name, body)

"""volmig-api behind a TLS-terminating proxy: its links name the proxy."""

from oslo_middleware import http_proxy_to_wsgi
from oslotest import base
import webob

from tests import fixtures as volmig_fixtures
from volmig.api.rest import app
from volmig.conf import CONF


class ProxyHeadersTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(volmig_fixtures.ConfFixture())
        self.useFixture(volmig_fixtures.RPCFixture())

    def self_link(self):
        request = webob.Request.blank('/', headers={
            'Host': 'volmig-api.internal:8774',
            'X-Forwarded-Proto': 'https',
            'X-Forwarded-Host': 'cloud.example.org'})
        response = request.get_response(app.build())
        self.assertEqual(200, response.status_code, response.text)
        [version] = response.json['versions']
        return version['links'][0]['href']

    def test_links_follow_the_proxy_when_told_to(self):
        # The middleware registers its option when it is made.
        CONF.register_opts(http_proxy_to_wsgi.OPTS, group='oslo_middleware')
        self.conf_fixture.conf(enable_proxy_headers_parsing=True,
                               group='oslo_middleware')
        self.assertTrue(self.self_link().startswith(
            'https://cloud.example.org/'), self.self_link())

    def test_headers_are_ignored_by_default(self):
        # A client cannot make volmig name a host of its choosing.
        self.assertTrue(self.self_link().startswith(
            'http://volmig-api.internal:8774/'), self.self_link())

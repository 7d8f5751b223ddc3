"""Who may read volmig-api's /metrics on its REST port."""

import webob

from tests.functional import base
from volmig import service
from volmig.api.rest import app


class MetricsAccessTest(base.ServicesTestCase):

    def configure(self):
        self.conf_fixture.conf(auth_strategy='noauth2', group='api')

    def service_list(self):
        # The cloud's counts come from the conductor.
        return [(service.CONDUCTOR, 'conductor-host')]

    def scrape(self, access, token=None):
        self.conf_fixture.conf(api_access=access, group='metrics')
        headers = {'X-Auth-Token': token} if token else {}
        return webob.Request.blank('/metrics', headers=headers).get_response(
            app.build())

    def test_open_to_anyone_by_default(self):
        answer = self.scrape('open')
        self.assertEqual(200, answer.status_code)
        self.assertIn('# TYPE volmig_rpc_request_seconds histogram',
                      answer.text)

    def test_token_needs_an_admin(self):
        self.assertEqual(401, self.scrape('token').status_code)
        refused = self.scrape('token', 'alice:project-a')
        self.assertEqual(403, refused.status_code)
        self.assertIn('volmig:metrics', refused.text)
        self.assertEqual(200, self.scrape('token', 'admin:admin').status_code)

    def test_off_serves_nothing_on_the_api_port(self):
        answer = self.scrape('off', 'admin:admin')
        self.assertEqual(404, answer.status_code)
        self.assertIn('api_access is off', answer.text)

"""volmig-api under a burst of new connections, more than it has threads:
every request gets an answer, a refusal if nothing else, never a reset
connection."""

import http.client
import json
import urllib.parse

from tests.functional import base
from tests.functional import test_races
from volmig.api import http as api_http

# Sixteen times the threads below, at once.
BURST = 64


class BurstTest(base.ServicesTestCase):

    def configure(self):
        self.conf_fixture.conf(auth_strategy='noauth2', workers=4,
                               group='api')

    def test_every_request_of_a_burst_is_answered(self):
        server, _ = self.create_server()
        api = api_http.HTTPService('127.0.0.1', 0)
        api.start()
        self.addCleanup(api.stop)
        endpoint = urllib.parse.urlsplit(api.endpoint)

        def ask(action):
            def request():
                connection = http.client.HTTPConnection(
                    endpoint.hostname, endpoint.port, timeout=120)
                try:
                    connection.request(
                        'POST', '/v2.1/servers/%s/action' % server['uuid'],
                        body=json.dumps({action: None}),
                        headers={'X-Auth-Token': 'admin:admin',
                                 'Content-Type': 'application/json'})
                    response = connection.getresponse()
                    return response.status, response.read()
                finally:
                    connection.close()
            return request
        # Stops and starts of one server, as an operator's script sends
        # them: one of each may win, the rest conflict.
        results = test_races.race(*[ask('os-stop' if n % 2 else 'os-start')
                                    for n in range(BURST)])

        self.assertEqual([], [r for r in results if isinstance(r, Exception)])
        for status, body in results:
            self.assertIn(status, (202, 409), body)
            self.assertNotIn(b'Traceback', body)

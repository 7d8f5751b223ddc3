"""volmig-api's process: what it serves, and in what order."""

import fixtures
from oslotest import base

from volmig import service
from volmig.api import http
from volmig.cmd import api


class APICommandTest(base.BaseTestCase):

    def test_the_rest_api_listens_before_the_rpc_face_starts(self):
        """Its "is ready" line, logged after the RPC face's first
        heartbeat, then means that the REST API listens too: a client
        that waited for it once found the port closed while the WSGI
        app was still being built."""
        served = []
        self.useFixture(fixtures.MockPatch('volmig.config.parse_args'))
        self.useFixture(fixtures.MockPatchObject(
            service, 'serve', lambda build: served.append(build())))
        self.useFixture(fixtures.MockPatchObject(
            service, 'Service', lambda binary: ('rpc', binary)))
        self.useFixture(fixtures.MockPatchObject(
            http, 'HTTPService', lambda: ('http',)))
        api.main()
        [group] = served
        self.assertEqual([('http',), ('rpc', service.API)], group.services)

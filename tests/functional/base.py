"""Real services, in this process, on the fake:// transport."""

import fixtures as oslo_fixtures
from oslotest import base

from tests import fixtures
from tests import storage_role
from volmig import service


class ServicesTestCase(storage_role.StorageRoleMixin, base.BaseTestCase):
    """Runs a conductor, an API and ``COMPUTES`` compute agents."""

    COMPUTES = 1

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(fixtures.ConfFixture())
        self.configure()
        self.useFixture(fixtures.DatabaseFixture())
        self.useFixture(fixtures.RPCFixture())
        self.useFixture(fixtures.PolicyFixture())
        self.services = {}
        self.addCleanup(lambda: fixtures.stop_services(
            self.services.values()))
        for binary, host in self.service_list():
            self.start_service(binary, host)
        self.setup_clients(rpc_timeout=20)

    def configure(self):
        """Hook for a test case's own options."""

    def service_list(self):
        hosts = ['compute-%d' % n for n in range(1, self.COMPUTES + 1)]
        return ([(service.CONDUCTOR, 'conductor-host'),
                 (service.API, 'api-host')]
                + [(service.COMPUTE, host) for host in hosts])

    def start_service(self, binary, host):
        server = service.Service(binary, host=host)
        server.start()
        self.services[host] = server
        return server

    def fake_disk(self, server, bdm):
        driver = self.services[server['host']].manager.driver
        return driver.guest_disk(server['uuid'], bdm['volume_id'])


class FileVolumesTestCase(ServicesTestCase):
    """volmig-volume too, its volumes real files in pool-a and pool-b."""

    def configure(self):
        pools = self.useFixture(oslo_fixtures.TempDir()).path
        self.conf_fixture.conf(pools={'pool-a': pools + '/pool-a',
                                      'pool-b': pools + '/pool-b'},
                               group='storage')
        self.conf_fixture.conf(backend='file', group='volume')

    def service_list(self):
        return super().service_list() + [(service.VOLUME, 'volume-host')]

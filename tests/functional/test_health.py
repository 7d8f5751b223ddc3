"""The healthcheck's checks against real databases and brokers."""

from oslotest import base

from tests import fixtures as volmig_fixtures
from tests.integration import base as integration_base
from volmig.api import health
from volmig.conf import CONF
from volmig.db import api as db_api


class HealthChecksTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(volmig_fixtures.ConfFixture())

    def _check(self, plugin):
        return plugin(CONF, {}).healthcheck(8788)

    def test_database_reachable(self):
        self.useFixture(volmig_fixtures.DatabaseFixture())
        result = self._check(health.DatabaseCheck)
        self.assertEqual((True, 'database OK'),
                         (result.available, result.reason))

    def test_database_unreachable(self):
        # A port nothing listens on.
        db_api.configure('postgresql+psycopg2://postgres@127.0.0.1:%d/volmig'
                         % integration_base.free_port())
        self.addCleanup(db_api.configure, CONF.database.connection)
        result = self._check(health.DatabaseCheck)
        self.assertEqual((False, 'database unreachable'),
                         (result.available, result.reason))

    def test_rabbitmq_reachable(self):
        if not integration_base.rabbit_reachable():
            self.skipTest('RabbitMQ is not reachable')
        self.conf_fixture.conf(
            transport_url='rabbit://guest:guest@127.0.0.1:5672/')
        result = self._check(health.MessagingCheck)
        self.assertEqual((True, 'RabbitMQ OK'),
                         (result.available, result.reason))

    def test_rabbitmq_unreachable(self):
        port = integration_base.free_port()
        self.conf_fixture.conf(
            transport_url='rabbit://guest:guest@127.0.0.1:%d/' % port)
        result = self._check(health.MessagingCheck)
        self.assertFalse(result.available)
        self.assertEqual('RabbitMQ unreachable', result.reason)
        self.assertIn('127.0.0.1: ', result.details)

    def test_one_broker_of_a_cluster_is_enough(self):
        if not integration_base.rabbit_reachable():
            self.skipTest('RabbitMQ is not reachable')
        port = integration_base.free_port()
        self.conf_fixture.conf(
            transport_url='rabbit://guest:guest@127.0.0.1:%d,'
                          'guest:guest@127.0.0.1:5672/' % port)
        result = self._check(health.MessagingCheck)
        self.assertTrue(result.available)

    def test_the_broker_answer_is_kept_for_the_cache_time(self):
        if not integration_base.rabbit_reachable():
            self.skipTest('RabbitMQ is not reachable')
        self.conf_fixture.conf(healthcheck_cache_seconds=3600, group='api')
        self.conf_fixture.conf(
            transport_url='rabbit://guest:guest@127.0.0.1:5672/')
        plugin = health.MessagingCheck(CONF, {})
        self.assertTrue(plugin.healthcheck(8788).available)
        # The broker goes away: probes still get the answer of the look
        # that opened a connection...
        self.conf_fixture.conf(transport_url='rabbit://guest:guest@'
                               '127.0.0.1:%d/' % integration_base.free_port())
        self.assertTrue(plugin.healthcheck(8788).available)
        # ...until it is older than the cache time.
        self.conf_fixture.conf(healthcheck_cache_seconds=0, group='api')
        self.assertEqual('RabbitMQ unreachable',
                         plugin.healthcheck(8788).reason)

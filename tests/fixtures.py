"""Fixtures shared by the unit, functional and integration tests."""

import os
import threading
import uuid

import fixtures
from oslo_config import fixture as config_fixture
import sqlalchemy as sa

from volmig import config
from volmig import policy
from volmig import rpc
from volmig import service
from volmig.conf import CONF
from volmig.conf import opts
from volmig.db import api as db_api
from volmig.db import host_keys
from volmig.db import models
from volmig.db import schema
from volmig.signing import keys

# Set to a PostgreSQL or MySQL URL (of a user that may create databases)
# to run the suite there; SQLite under a temporary directory otherwise.
DB_URL_VARIABLE = 'VOLMIG_TEST_DB_URL'

config.register_opts(CONF)


class ConfFixture(fixtures.Fixture):
    """volmig's options, on a temporary state directory."""

    def _setUp(self):
        self.conf = self.useFixture(config_fixture.Config(CONF)).config
        CONF([], project='volmig', default_config_files=[])
        opts.set_defaults(CONF)
        self.state_path = self.useFixture(fixtures.TempDir()).path
        # A host is down by the age of its record, which the tests that
        # want one down set an hour back: a heartbeat late on a loaded
        # machine (CI ran three suites of four workers on two cores) must
        # not take an agent down under a test that never asked for it.
        self.conf(state_path=self.state_path, transport_url='fake://',
                  host='test-host', report_interval=1, service_down_time=60,
                  rpc_response_timeout=20)
        self.conf(driver='fake', job_poll_interval=0.05, group='compute')
        # Every process of a test is a controller unless it says otherwise
        # (tests.integration.cluster exports the hosts' own keys).
        self.key_file = os.path.join(self.state_path, 'key.json')
        keys.create(self.key_file)
        self.conf(key_file=self.key_file, group='signing')


class DatabaseFixture(fixtures.Fixture):
    """A fresh database for one test, migrated to ``revision``, on
    ``server_url`` (a user's URL with no database), else the
    environment's server."""

    def __init__(self, server_url: str | None = None,
                 revision: str = 'head'):
        super().__init__()
        self.server_url = server_url
        self.revision = revision

    def _setUp(self):
        server_url = self.server_url or os.environ.get(DB_URL_VARIABLE)
        if server_url:
            url = self._create_database(server_url)
        else:
            url = 'sqlite:///%s' % os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'volmig.sqlite')
        CONF.set_override('connection', url, group='database')
        self.addCleanup(CONF.clear_override, 'connection', group='database')
        db_api.configure(url)
        self.addCleanup(lambda: db_api.get_engine().dispose())
        schema.upgrade(self.revision)

    def _create_database(self, server_url: str) -> str:
        url, drop = create_database(server_url)
        self.addCleanup(drop)
        return url


def create_database(server_url: str, prefix: str = 'volmig_test'):
    """A fresh database on a server; returns (its url, drop)."""
    name = '%s_%s' % (prefix, uuid.uuid4().hex[:12])
    # Pinged before use: a database node may have gone under a test.
    admin = sa.create_engine(server_url, isolation_level='AUTOCOMMIT',
                             pool_pre_ping=True)
    with admin.connect() as connection:
        # MySQL's own utf8 is three bytes a character at most.
        charset = (' CHARACTER SET utf8mb4'
                   if admin.dialect.name in models.MYSQL else '')
        connection.execute(sa.text('CREATE DATABASE %s%s' % (name, charset)))

    # A service thread of the test may still hold a connection for a
    # moment after the test ends; PostgreSQL ends it rather than refuse.
    force = (' WITH (FORCE)' if admin.dialect.name == 'postgresql'
             else '')

    def drop():
        with admin.connect() as connection:
            connection.execute(sa.text('DROP DATABASE %s%s' % (name, force)))
        admin.dispose()
    return (sa.engine.make_url(server_url).set(database=name)
            .render_as_string(hide_password=False)), drop


class RPCFixture(fixtures.Fixture):
    """A transport for this test only, torn down afterwards."""

    def _setUp(self):
        rpc.cleanup()
        rpc.init()
        self.addCleanup(rpc.cleanup)


class PolicyFixture(fixtures.Fixture):

    def _setUp(self):
        policy.reset()
        self.addCleanup(policy.reset)


def export_key(master_file: str, service: str, host: str, path: str) -> str:
    """``service``'s own key on ``host``, recorded in this process's
    database and written to ``path``, as "volmig-manage key export" does
    it."""
    generation = host_keys.register(service, host)
    keys.export(master_file, keys.Holder(service, host, generation), path)
    return path


def stop_services(services) -> None:
    """Stop in-process services: all but the conductor at once, then the
    conductor, which hears the others' last reports. Each stop waits for
    its idle RPC workers to look for it (futurist's look once a second):
    one after another, stops were 2.7 s of a 4.3 s functional test."""
    def stop_all(group):
        stopping = [threading.Thread(target=server.stop) for server in group]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
    stop_all([server for server in services
              if server.binary != service.CONDUCTOR])
    stop_all([server for server in services
              if server.binary == service.CONDUCTOR])

"""volmig on a MariaDB Galera cluster of three nodes behind HAProxy.

Two conductors write through different HAProxy listeners, so to
different nodes, as agents' reports reach whichever conductor takes
them: Galera certifies both nodes' transactions and gives up the later
of two that wrote the same row. Real guests on two hosts write
throughout, their volumes on volmig-volume. Then Galera nodes are
killed in the middle of migrations, the one HAProxy writes to first.

Each migration ends terminal, each move in success, and each volume's
file holds every write its guest acknowledged. The cluster is shared by
the class's tests.
"""

import concurrent.futures
import os
import time

import sqlalchemy as sa
from testtools import content

from tests.integration import base
from tests.integration import cluster
from tests.integration import galera
from tests.integration import real_guest_base
from volmig import exception
from volmig import states
from volmig.conf import CONF

# What a conductor logs when a transaction gave up was not run again.
UNHANDLED = ('DBDeadlock', 'DBConnectionError', 'exceeded retry limit')


class GaleraTest(real_guest_base.RealGuestTestCase,
                  base.DeployedOnceTestCase):
    COMPUTE_OPTIONS: dict = {}

    @classmethod
    def deploy(cls, deployment):
        cls.galera = deployment.useFixture(galera.GaleraCluster())

    def database_server(self):
        # The API, volmig-volume and the first conductor: node g1 while
        # it is up.
        return self.galera.writer(0)

    def setUp(self):
        # Each test begins with every node up, whatever the last did.
        for node in self.galera.nodes:
            if node.process.poll() is not None:
                self.galera.start(node)
        super().setUp()
        # A second conductor, whose writer is g2.
        url = sa.engine.make_url(CONF.database.connection).set(
            port=sa.engine.make_url(self.galera.writer(1)).port)
        self.cluster.spawn('volmig-conductor', 'conductor-2',
                           cluster.write_config(
                               os.path.join(self.state_path, 'c2.conf'),
                               {('DEFAULT', 'host'): 'conductor-2',
                                ('database', 'connection'):
                                url.render_as_string(hide_password=False)})
                           ).wait_ready()
        self.addCleanup(self.assert_no_unhandled_database_error)

    def assert_no_unhandled_database_error(self):
        for name in ('conductor', 'conductor-2', 'volume'):
            log = b''.join(self.processes[name]._log_bytes()).decode(
                errors='replace')
            self.assertEqual([], [line for line in log.splitlines()
                                  if any(word in line for word in UNHANDLED)
                                  and ' ERROR ' in line], name)

    def attachment(self, vol) -> str:
        [attachment] = self.volumes.get_volume(self.admin,
                                               vol['id'])['attachments']
        return attachment['id']

    def report_at_once(self, migration_id: str, count: int) -> list:
        """Progress reports 1 to ``count`` on one migration from 8
        threads, as agents' reports reach both conductors; returns the
        errors that are not an answer about the migration's state."""
        def report(done):
            try:
                self.conductor.migration_report_progress(
                    self.ctxt, migration_id, done, count)
            except exception.InvalidMigrationState:
                pass  # an answer: it moved on meanwhile
            except Exception as exc:
                return exc
            return None
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            return [error for error in pool.map(report,
                                                range(1, count + 1))
                    if error is not None]

    def test_conductors_on_two_nodes_conflict_and_nothing_is_lost(self):
        vols = [self.volume(size_mb=32) for _ in self.hosts]
        servers = [self.boot([vol], host)
                   for vol, host in zip(vols, self.hosts, strict=True)]
        for server, vol in zip(servers, vols, strict=True):
            self.wait_for_acks(server, vol['id'], 10)
        before = self.galera.conflicts()

        # vols[1] moves through volmig-volume while the test, as block
        # storage, holds vols[0]'s migration in started and 400 reports
        # on it reach both conductors at once.
        self.migrate_to(vols[1], 'pool-b')
        started = self.client.start(self.ctxt, self.attachment(vols[0]))
        self.assertEqual([], self.report_at_once(started['id'], 400))
        # Each report that raised the figure was kept: none was lost to
        # a transaction given up.
        self.assertEqual((400, 400), (lambda m: (m['bytes_done'], m[
            'bytes_total']))(self.client.get(self.ctxt, started['id'])))
        self.client.cancel(self.ctxt, self.attachment(vols[0]))
        cancelled = self.client.wait_for(self.ctxt, started['id'],
                                         states.CANCELLED, 120)
        self.assertEqual(states.CANCELLED, cancelled['status'])
        self.assert_moved(servers[1], vols[1], 'pool-b', 'first move')
        self.assertGreater(self.galera.conflicts(), before,
                           'no transaction conflicted: nothing was tested')

        # Both volumes again and again, at once, over both conductors.
        for round_, (first, second) in enumerate(
                (('pool-b', 'pool-a'), ('pool-a', 'pool-b'),
                 ('pool-b', 'pool-a'))):
            self.migrate_to(vols[0], first)
            self.migrate_to(vols[1], second)
            self.assert_moved(servers[0], vols[0], first, 'round %d' % round_)
            self.assert_moved(servers[1], vols[1], second,
                              'round %d' % round_)
        self.addDetail('galera-conflicts', content.text_content(
            str(self.galera.conflicts() - before)))

    def test_a_node_killed_mid_migration(self):
        vol = self.volume(size_mb=64)
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 10)
        # g1: what HAProxy sends the API, volmig-volume and the first
        # conductor to; g2: the second conductor's; g3: nobody's.
        for node, pool in zip(self.galera.nodes, ('pool-b', 'pool-a',
                                                  'pool-b'), strict=True):
            self.migrate_to(vol, pool)
            self.when_copying(vol)
            self.galera.kill(node)
            killed = time.monotonic()
            self.assert_moved(server, vol, pool, '%s killed' % node.name)
            self.addDetail('%s-killed-to-terminal' % node.name,
                           content.text_content('%.1f s' % (
                               time.monotonic() - killed)))
            self.galera.start(node)
        # Every node holds the same records.
        table = '%s.volume_migrations' % sa.engine.make_url(
            CONF.database.connection).database
        sums = {node.name: node.sql('CHECKSUM TABLE %s' % table).split()[-1]
                for node in self.galera.nodes}
        self.assertEqual(1, len(set(sums.values())), sums)
        self.stop(server)
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))


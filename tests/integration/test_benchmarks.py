"""The RPC benchmarks as README.rst runs them, as processes, on the
machine's RabbitMQ and PostgreSQL, at a size a test can afford."""

import os
import re
import subprocess
import sys

from oslotest import base
import testtools

from tests.integration import base as integration_base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NUMBER = r'([\d.]+)'


@testtools.skipUnless(integration_base.rabbit_reachable(),
                      'RabbitMQ is not reachable')
class BenchmarkTest(base.BaseTestCase):
    """Each benchmark starts its own services, on a vhost of its own."""

    def run_benchmark(self, *args) -> str:
        run = subprocess.run([sys.executable, '-m', *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        self.assertEqual(0, run.returncode, run.stderr[-3000:])
        self.assertNotIn('Traceback', run.stdout + run.stderr)
        return run.stdout

    def number(self, output: str, label: str) -> float:
        found = re.search(r'^ *%s +%s' % (re.escape(label), NUMBER), output,
                          re.MULTILINE)
        self.assertIsNotNone(found, '%r not in:\n%s' % (label, output))
        return float(found.group(1))

    def test_rpc_start_shows_where_a_start_goes(self):
        output = self.run_benchmark('benchmarks.rpc_start',
                                    '--iterations', '5')
        for row in ('bare oslo.messaging call', 'volmig start (call)',
                    'volmig cancel (accepted)'):
            self.assertGreater(self.number(output, row), 0)
        start = self.number(output, 'start, as the client waited')
        api = self.number(output, 'served by volmig-api migration_start')
        # Each process's share comes from its own /metrics; what the API
        # served holds its three calls, and the client's wait holds it.
        leaves = [self.number(output, label) for label in (
            'volmig-conductor migration_begin',
            'volmig-compute migration_start',
            'volmig-conductor migration_started')]
        for ms in leaves:
            self.assertGreater(ms, 0)
        self.assertLess(sum(leaves), api)
        self.assertLess(api, start)
        rest = self.number(output, "the 4 hops and volmig-api's own work")
        self.assertAlmostEqual(start - sum(leaves), rest, delta=0.02)

    def test_rpc_start_on_volmig_volume_calls_nothing_back(self):
        output = self.run_benchmark('benchmarks.rpc_start',
                                    '--iterations', '5', '--backend', 'file')
        self.assertIn('block storage file', output)
        # volmig-volume is the caller of a start: no call goes back to it
        # from inside one, nor from a cancel.
        self.assertEqual(0.0, self.number(
            output, 'volmig-volume requests per start and cancel:'))
        self.assertGreater(self.number(output, 'volmig start (call)'), 0)

    def test_scale_counts_requests_and_statements_per_migration(self):
        output = self.run_benchmark(
            'benchmarks.scale', '--migrations', '4', '--agents', '2',
            '--agents-per-process', '2', '--concurrency', '2',
            '--job-seconds', '0.2', '--conductors', '2', '--apis', '2',
            '--report-interval', '1', '--idle-seconds', '2')
        # Two conductors, two APIs and two agents beat each second.
        idle = re.search(r'^heartbeats while nothing migrates: %s '
                         r'service_update/s' % NUMBER, output, re.MULTILINE)
        self.assertIsNotNone(idle, output)
        self.assertGreater(float(idle.group(1)), 0)
        # What grew is counted: one record per migration.
        self.assertRegex(output, r'grew per migration: .*'
                         r'volume_migrations \+1\.00')
        # PostgreSQL's own count of a migration's transactions (its
        # nonces' and pings' included, which the services do not count).
        self.assertRegex(output, r'PostgreSQL transactions \+[1-9]')
        per_migration = re.search(
            r'^RPC requests served per migration: %s \((.*)\)$' % NUMBER,
            output, re.MULTILINE)
        self.assertIsNotNone(per_migration, output)
        served = dict(
            (method, float(count)) for method, count in (
                part.split() for part in per_migration.group(2).split(', ')))
        # Every migration's start reaches the API and its agent, and the
        # conductor's begin, once each at least.
        self.assertGreaterEqual(served['migration_start'], 2)
        self.assertGreaterEqual(served['migration_begin'], 1)
        statements = re.search(
            r'^database statements per migration: %s; machine CPU per bare '
            r'statement .*: %s ms$' % (NUMBER, NUMBER), output, re.MULTILINE)
        self.assertIsNotNone(statements, output)
        self.assertGreater(float(statements.group(1)), 0)
        self.assertGreater(float(statements.group(2)), 0)
        # The floor counts each request as a bare call, and the
        # statements on top.
        floor = re.search(r'a bare statement: %s bare calls of CPU per '
                          r'migration' % NUMBER, output)
        self.assertIsNotNone(floor, output)
        self.assertGreater(float(floor.group(1)),
                           float(per_migration.group(1)))
        # The same calls as far apart as the migrations' requests: an
        # echo server for each of the two conductors, APIs and agents.
        paced = re.search(r'^bare calls as far apart as the migrations\' '
                          r'requests \((\d+) echo servers, .*: %s ms of '
                          r'machine CPU each' % NUMBER, output, re.MULTILINE)
        self.assertIsNotNone(paced, output)
        self.assertEqual(6, int(paced.group(1)))
        self.assertGreater(float(paced.group(2)), 0)
        self.assertRegex(output, r'each request cost a bare call so paced '
                                 r'and each statement a bare statement: '
                                 r'%s bare calls' % NUMBER)

    def test_drain_scale_compares_the_cost_per_volume(self):
        output = self.run_benchmark(
            'benchmarks.drain_scale', '--small', '2', '--large', '4',
            '--max-parallel', '2')
        per_volume = re.findall(
            r'^ +(\d+) volumes: %s s per volume \(dd of the same file: '
            r'%s s\)$' % (NUMBER, NUMBER), output, re.MULTILINE)
        self.assertEqual(['2', '4'], [count for count, _, _ in per_volume],
                         output)
        self.assertGreater(float(per_volume[0][1]), 0)
        self.assertGreater(self.number(
            output, 'cost per volume, 4 volumes against 2:'), 0)

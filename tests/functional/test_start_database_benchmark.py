"""``python -m benchmarks.start_database``, as README.rst runs it."""

import os
import re
import subprocess
import sys

from oslotest import base

from tests import fixtures as volmig_fixtures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ROW = re.compile(r'^(sqlite|postgresql) +(bare|begin|started) +([\d.]+) ms '
                 r'+([\d.]+) bare +(\d+) statements +(\d+) calls$')


class StartDatabaseBenchmarkTest(base.BaseTestCase):

    def test_it_times_begin_and_started_against_a_bare_transaction(self):
        server = os.environ.get(volmig_fixtures.DB_URL_VARIABLE) or 'none'
        run = subprocess.run(
            [sys.executable, '-m', 'benchmarks.start_database',
             '--iterations', '3', '--postgresql', server],
            cwd=ROOT, capture_output=True, text=True, timeout=300)
        self.assertEqual(0, run.returncode, run.stderr)
        self.assertNotIn('Traceback', run.stdout + run.stderr)
        rows = [ROW.match(line) for line in run.stdout.splitlines()[1:]]
        self.assertNotIn(None, rows, run.stdout)
        databases = ['sqlite'] + (['postgresql'] if server != 'none' else [])
        self.assertEqual(
            [(db, step) for db in databases
             for step in ('bare', 'begin', 'started')],
            [row.group(1, 2) for row in rows])
        for row in rows:
            statements, calls = int(row.group(5)), int(row.group(6))
            # A transaction's BEGIN (or ping) and COMMIT are calls too.
            self.assertGreater(statements, 0, row.group(0))
            self.assertGreaterEqual(calls, statements + 2, row.group(0))

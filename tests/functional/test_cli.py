"""The ``volmig`` command line, in this process, against volmig-api on
HTTP with volmig-volume on real files and a fake agent: every command
class that openstackclient loads too, its output formats and columns,
and its errors, each in one plain line."""

import io
import json
import logging

from tests.functional import base
from volmig.api import http as api_http
from volmig.cli import app


class _VolmigApp(app.VolmigApp):

    def configure_logging(self):
        root = logging.getLogger()
        before = set(root.handlers)
        super().configure_logging()
        # Only the command's own lines: this process's services log too.
        for handler in set(root.handlers) - before:
            handler.addFilter(lambda record: record.name.startswith(
                (self.LOG.name, 'cliff', 'osc_lib', 'volmig.cli')))


class CLITest(base.FileVolumesTestCase):

    def configure(self):
        super().configure()
        self.conf_fixture.conf(drain_interval=0.2, group='storage')
        self.conf_fixture.conf(auth_strategy='noauth2', group='api')

    def setUp(self):
        super().setUp()
        api = api_http.HTTPService('127.0.0.1', 0)
        api.start()
        self.addCleanup(api.stop)
        self.endpoint = api.endpoint

    def cli(self, *argv, endpoint=None):
        """(exit code, standard output, standard error) of ``volmig``."""
        volmig = _VolmigApp()
        volmig.stdout, volmig.stderr = io.StringIO(), io.StringIO()
        root = logging.getLogger()
        handlers = list(root.handlers)
        try:
            code = volmig.run(['--os-endpoint', endpoint or self.endpoint,
                               *argv])
        finally:
            # cliff adds a console handler at every run.
            for handler in set(root.handlers) - set(handlers):
                root.removeHandler(handler)
        return code, volmig.stdout.getvalue(), volmig.stderr.getvalue()

    def ok(self, *argv):
        code, out, err = self.cli(*argv)
        self.assertEqual(0, code, err)
        return out

    def json(self, *argv):
        return json.loads(self.ok(*argv, '-f', 'json'))

    def refused(self, *argv, **kwargs):
        """The command's one line of error."""
        code, out, err = self.cli(*argv, **kwargs)
        self.assertEqual(1, code, out)
        self.assertNotIn('Traceback', err)
        [line] = err.splitlines()
        return line

    def boot(self, name, volume):
        self.ok('server', 'create', name, '--volume', volume)
        return self.wait_until(lambda: (lambda s: s if s['status'] ==
                                        'ACTIVE' else None)(
            self.json('server', 'show', name)), what='%s to boot' % name)

    def test_a_live_migration_from_start_to_end(self):
        volume = self.json('volume', 'create', 'data', '--size-mb', '4',
                           '--pool', 'pool-a')
        self.assertEqual(('data', 'pool-a'), (volume['displayName'],
                                              volume['pool']))
        server = self.boot('vm', 'data')
        self.assertEqual(['%s (rw)' % volume['id']], server['volumes'])
        shown = self.json('volume', 'show', 'data')
        # Lists stay lists in JSON.
        self.assertEqual([server['id']], [attachment['serverId'] for
                                          attachment in shown['attachments']])

        started = self.json('volume', 'migration', 'start', 'data', '--to',
                            'pool-b', '--wait', '--poll-interval', '0.1')
        [migration] = started
        self.assertEqual(server['id'], migration['Server ID'])
        self.assertEqual('pool-b', self.json('volume', 'show',
                                             volume['id'])['pool'])
        listed = self.json('volume', 'migration', 'list', '--volume', 'data',
                           '--long')
        self.assertEqual([(migration['ID'], 'completed', True)],
                         [(row['ID'], row['Status'], 'Bytes Total' in row)
                          for row in listed])
        self.assertEqual([], self.json('volume', 'migration', 'list',
                                       '--status', 'started'))
        self.assertEqual(volume['id'], self.json(
            'volume', 'migration', 'show', migration['ID'])['volume_id'])
        # An operator's action that would lose data is refused, saying so.
        line = self.refused('volume', 'migration', 'force', 'complete',
                            migration['ID'])
        self.assertIn('409', line)
        self.assertIn('it is completed', line)

    def test_cliff_columns_and_the_old_names(self):
        for name in ('one', 'two'):
            self.ok('volume', 'create', name, '--size-mb', '1')
        self.assertEqual(['one', 'two'], sorted(self.ok(
            'volume', 'list', '--sort-column', 'Name', '-f', 'value', '-c',
            'Name').split()))
        self.assertIn('Migration Status', self.json('volume', 'list',
                                                    '--long')[0])
        self.assertNotIn('Migration Status', self.json('volume', 'list')[0])
        # 0.x's name still runs, and says what replaced it.
        code, out, err = self.cli('migration', 'list', '-f', 'json')
        self.assertEqual((0, []), (code, json.loads(out)))
        self.assertIn('use "volmig volume migration list"', err)

    def test_a_pool_drain_planned_then_run(self):
        self.ok('volume', 'create', 'idle', '--size-mb', '2', '--pool',
                'pool-a')
        self.ok('volume', 'create', 'used', '--size-mb', '2', '--pool',
                'pool-a')
        self.boot('vm', 'used')
        plan = self.json('volume', 'pool', 'drain', 'start', 'pool-a',
                         '--to', 'pool-b', '--dry-run')
        self.assertEqual({'idle': 'copy', 'used': 'live'},
                         {row['Name']: row['Action'] for row in plan})
        code, out, err = self.cli('volume', 'pool', 'drain', 'start',
                                  'pool-a', '--to', 'pool-b', '--wait',
                                  '--poll-interval', '0.1', '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual({'done'}, {row['State'] for row in json.loads(out)})
        self.assertIn('completed: 2/2 volumes', err)
        self.assertEqual(['completed'], self.ok(
            'volume', 'pool', 'drain', 'list', 'pool-a', '-f', 'value', '-c',
            'Status').split())
        self.assertEqual({'pool-b'}, {volume['Pool'] for volume in self.json(
            'volume', 'list')})
        line = self.refused('volume', 'pool', 'drain', 'cancel', 'pool-a')
        self.assertIn('pool-a', line)

    def test_errors_are_one_plain_line(self):
        line = self.refused('--os-volume-migration-api-version', '3.0',
                            'volume', 'list')
        self.assertIn("'3.0' is not one of 2.1 to 2.89", line)
        line = self.refused('volume', 'show', 'nothing')
        self.assertIn("no volume is named 'nothing'", line)
        line = self.refused('volume', 'list', endpoint='http://127.0.0.1:1')
        self.assertIn('cannot reach volmig-api at http://127.0.0.1:1', line)

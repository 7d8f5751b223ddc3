"""What an operator runs against live services, as separate processes on
RabbitMQ: the service commands, the healthcheck and Guru Meditation."""

import glob
import os
import signal
import subprocess
import sys

import requests

from tests.integration import base
from tests.integration import cluster
from volmig import service
from volmig import states

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')


class OperatorToolsTest(base.ProcessTestCase):

    COMPUTES = 2

    def options(self):
        options = super().options()
        options[('oslo_reports', 'log_dir')] = os.path.join(
            self.conf_fixture.state_path, 'reports')
        options[('oslo_messaging_notifications', 'driver')] = 'messagingv2'
        return options

    def _manage(self, *args) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [os.path.join(cluster.BIN_DIR, 'volmig-manage'),
             '--config-file', self.cluster.config_file, 'service', *args],
            capture_output=True, text=True, timeout=120)
        self.assertNotIn('Traceback', result.stdout + result.stderr)
        return result

    def test_service_commands(self):
        listing = self._manage('list')
        self.assertEqual(0, listing.returncode, listing.stderr)
        rows = {tuple(line.split()[:4]) for line in
                listing.stdout.splitlines()}
        self.assertIn(('volmig-compute', 'compute-2', 'enabled', 'up'), rows)
        disabled = self._manage('disable', service.COMPUTE, 'compute-2',
                                '--reason', 'maintenance')
        self.assertEqual('volmig-compute on compute-2 is disabled\n',
                         disabled.stdout)
        servers = [self.api('POST', '/servers', {'server': {'name': 'vm'}})
                   for _ in range(2)]
        hosts = {self.wait_for_server(server['server']['id'],
                                      states.VM_ACTIVE)['host']
                 for server in servers}
        self.assertEqual({'compute-1'}, hosts)
        listed = self.api('GET', '/os-services?host=compute-2')['services']
        self.assertEqual([('disabled', 'maintenance', 'up')],
                         [(s['status'], s['disabled_reason'], s['state'])
                          for s in listed])
        refused = self._manage('delete', service.COMPUTE, 'compute-2')
        self.assertEqual(1, refused.returncode)
        self.assertIn('volmig-compute on host compute-2 is up: stop it '
                      'first', refused.stderr)
        self.cluster.processes['compute-2'].may_die = True
        self.cluster.processes['compute-2'].stop()
        self.wait_until(lambda: self.api(
            'GET', '/os-services?host=compute-2')['services'][0]['state']
            == 'down', what='compute-2 to be down')
        deleted = self._manage('delete', service.COMPUTE, 'compute-2')
        self.assertEqual(0, deleted.returncode, deleted.stderr)
        self.assertEqual([], self.api('GET',
                                      '/os-services?host=compute-2')
                         ['services'])

    def api(self, method, path, body=None):
        response = requests.request(
            method, self.endpoint + path, json=body, timeout=30,
            headers={'X-Auth-Token': 'admin:admin',
                     'OpenStack-API-Version': 'compute 2.61'})
        self.assertLess(response.status_code, 300, response.text)
        return response.json()

    def test_healthcheck_on_rabbitmq(self):
        root = self.endpoint.rsplit('/v2.1', 1)[0]
        answer = requests.get(root + '/healthcheck', timeout=30,
                              headers={'Accept': 'application/json'})
        self.assertEqual(200, answer.status_code, answer.text)
        self.assertEqual(['database OK', 'RabbitMQ OK'],
                         answer.json()['reasons'])

    def test_the_notification_consumer_example(self):
        example = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, 'doc', 'examples',
                                          'notification_consumer.py'),
             '--transport-url', self.vhost.url, '--count', '6'],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(example.kill)
        self.assertEqual('listening\n', example.stdout.readline())
        server, bdm = self.create_server('compute-1')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        output, _ = example.communicate(timeout=60)
        # The listener dispatches on a pool of threads: any order.
        lines = [line.split() for line in output.splitlines()]
        publisher = 'volmig-compute:compute-1'
        agent = {tuple(line[:3]): line[3] for line in lines
                 if line[1] == publisher}
        self.assertEqual(
            {('instance.create.start', publisher, server['uuid']),
             ('instance.create.end', publisher, server['uuid']),
             ('volume_migration.start.start', publisher, migration['id']),
             ('volume_migration.start.end', publisher, migration['id'])},
            set(agent))
        self.assertEqual('started', agent[('volume_migration.start.end',
                                           publisher, migration['id'])])
        # The conductor's: each status it recorded.
        self.assertEqual(
            [('volume_migration.update', migration['id'], 'started'),
             ('volume_migration.update', migration['id'], 'starting')],
            sorted((line[0], line[2], line[3]) for line in lines
                   if line[1].startswith('volmig-conductor:')))

    def test_guru_meditation_on_sigusr2(self):
        reports = os.path.join(self.conf_fixture.state_path, 'reports')
        os.makedirs(reports, exist_ok=True)
        agent = self.cluster.processes['compute-1'].process
        agent.send_signal(signal.SIGUSR2)

        def report():
            for path in glob.glob(os.path.join(reports, '*gurumeditation*')):
                with open(path) as written:
                    text = written.read()
                # The configuration section comes last.
                if 'host = compute-1' in text:
                    return text
            return None
        text = self.wait_until(report, timeout=30, what='a report')
        self.assertIn('Guru Meditation', text)
        self.assertIn('Threads', text)
        self.assertIsNone(agent.poll())
        self.check_alive()

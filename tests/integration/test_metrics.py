"""Prometheus metrics from real processes: the API's, for the cloud, and
a qemu agent's own, after a live migration and a refusal: what each
process served, and how long it took."""

from prometheus_client import parser
import requests

from tests.integration import base
from tests.integration import test_qemu_data_path
from volmig import exception
from volmig import states


def scrape(url: str) -> dict:
    """{(name, frozenset(labels)): value} of every sample."""
    answer = requests.get(url, timeout=30)
    answer.raise_for_status()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in parser.text_string_to_metric_families(answer.text)
            for sample in family.samples}


class MetricsTest(test_qemu_data_path.QemuTestCase):

    def process_options(self):
        self.agent_port = base.free_port()
        options = super().process_options()
        options.setdefault('compute-1', {})[('metrics', 'port')] = \
            self.agent_port
        return options

    def test_a_migration_and_a_refusal_show(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        self.write_some(writer, 30)
        exc = self.assertRaises(exception.InvalidMigrationState,
                                self.client.complete, self.ctxt,
                                bdm['attachment_id'],
                                bdm['attachment_id'])
        self.assertIn('not started', str(exc))
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        self.write_some(writer, 20, 30)
        dst, attachment = self.copy_to_dst(server, bdm, vol)
        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        self.assert_image(dst['path'], writer)

        agent = scrape('http://127.0.0.1:%d/metrics' % self.agent_port)
        self.assertGreater(agent[('volmig_job_bytes_copied_total',
                                  frozenset())], 0)
        steps = {dict(labels)['step'] for name, labels in agent
                 if name == 'volmig_guest_io_pause_milliseconds_count'}
        self.assertEqual({'start', 'switch', 'complete'}, steps)
        self.assertEqual(1, sum(
            value for (name, _), value in agent.items()
            if name == 'volmig_job_duration_seconds_count'))

        # Each process times what it served: the agent its start, the
        # API the client's start and both completes, the refused one too.
        start = frozenset({('method', 'migration_start')})
        self.assertEqual(1, agent[('volmig_rpc_request_seconds_count',
                                   start)])
        api = scrape(self.endpoint.rsplit('/v2.1', 1)[0] + '/metrics')
        served = {dict(labels)['method']: value
                  for (name, labels), value in api.items()
                  if name == 'volmig_rpc_request_seconds_count'}
        self.assertEqual(1, served['migration_start'])
        self.assertEqual(2, served['migration_complete'])
        self.assertGreater(api[('volmig_rpc_request_seconds_sum', start)],
                           0)
        self.assertEqual(1, api[('volmig_migrations',
                                 frozenset({('status', 'completed')}))])
        self.assertEqual(1, api[('volmig_rpc_errors_total', frozenset({
            ('method', 'migration_complete'),
            ('error', 'InvalidMigrationState')}))])

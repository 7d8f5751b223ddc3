"""What an operator runs, as processes: volmig-manage and the volmig CLI
against a conductor, an API and compute agents over RabbitMQ."""

import json
import os
import signal
import subprocess  # nosec B404
import sys

from tests.integration import base
from volmig import states


class OperatorCommandsTest(base.ProcessTestCase):

    def manage(self, *args):
        result = subprocess.run(  # nosec B603
            [os.path.join(sys.prefix, 'bin', 'volmig-manage'),
             '--config-file', self.cluster.config_file, *args],
            capture_output=True, text=True, timeout=120, check=False)
        self.assertNotIn('Traceback', result.stderr)
        return result.returncode, result.stdout, result.stderr

    def test_list_show_abort_and_reset_state(self):
        server, bdm = self.create_server('compute-1')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])

        code, out, _ = self.manage('migration', 'list', '--status',
                                   'started', '--host', 'compute-1')
        self.assertEqual(0, code)
        self.assertIn(migration['id'], out)
        code, out, _ = self.manage('migration', 'show', migration['id'])
        self.assertEqual(0, code)
        self.assertIn('status             started', out)

        # Each refusal says why, and exits 1.
        code, _, err = self.manage('server', 'reset-state', server['uuid'])
        self.assertEqual(1, code)
        self.assertIn('abort or recover the migration', err)
        code, _, err = self.manage('migration', 'recover', migration['id'])
        self.assertEqual(1, code)
        self.assertIn('block-storage service', err)

        code, _, _ = self.manage('migration', 'abort', migration['id'])
        self.assertEqual(0, code)
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        code, _, err = self.manage('migration', 'abort', migration['id'])
        self.assertEqual(1, code)
        self.assertIn('cancelled', err)

        code, out, _ = self.manage('server', 'reset-state', server['uuid'],
                                   '--state', 'error')
        self.assertEqual(0, code)
        self.assertEqual(states.VM_ERROR, self.conductor.instance_get(
            self.admin, server['uuid'])['vm_state'])

    def test_the_cli_aborts_and_refuses(self):
        server, bdm = self.create_server('compute-1')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        code, _, err = self.cli('volume', 'migration', 'force', 'complete',
                                migration['id'])
        self.assertNotEqual(0, code)
        self.assertIn('409', err)
        code, out, err = self.cli('volume', 'migration', 'abort',
                                  migration['id'], '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual(states.CANCELLING, json.loads(out)['status'])
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)

    def test_the_cli_takes_names_and_fails_in_one_line(self):
        code, out, err = self.cli('volume', 'create', 'data', '--size-mb',
                                  '16', '-f', 'value', '-c', 'id')
        self.assertEqual(0, code, err)
        volume_id = out.strip()
        code, out, err = self.cli('server', 'create', 'vm', '--volume',
                                  'data', '-f', 'value', '-c', 'ID')
        self.assertEqual(0, code, err)
        server_id = out.strip()
        self.wait_for_server(server_id, states.VM_ACTIVE)
        code, out, err = self.cli('server', 'show', 'vm', '-f', 'value',
                                  '-c', 'id')
        self.assertEqual((0, server_id), (code, out.strip()), err)
        code, out, err = self.cli('volume', 'show', 'data', '-f', 'json')
        self.assertEqual(0, code, err)
        shown = json.loads(out)
        self.assertEqual((volume_id, [(server_id, 'rw')]), (
            shown['id'], [(attachment['serverId'], attachment['attach_mode'])
                          for attachment in shown['attachments']]))
        # A second "data": the name no longer says which.
        self.assertEqual(0, self.cli('volume', 'create', 'data',
                                     '--size-mb', '16')[0])
        for args, reason in (
                (('volume', 'show', 'data'),
                 "2 volumes are named 'data': give an id"),
                (('volume', 'delete', 'nothing'),
                 "no volume is named 'nothing'")):
            code, _, err = self.cli(*args)
            self.assertEqual((1, [reason]), (code, err.splitlines()))
        # An API that is not there: one line, whatever requests says.
        nowhere = 'http://127.0.0.1:%d/v2.1' % base.free_port()
        result = subprocess.run(  # nosec B603
            [os.path.join(sys.prefix, 'bin', 'volmig'), '--os-endpoint',
             nowhere, 'server', 'list'], capture_output=True, text=True,
            timeout=60, check=False)
        self.assertEqual(
            (1, ['cannot reach volmig-api at %s (ConnectFailure)'
                 % nowhere]),
            (result.returncode, result.stderr.splitlines()))

    def test_a_lost_host_is_recovered_by_hand(self):
        server, bdm = self.create_server('compute-2')
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        # The host is gone for good, its guest's overlay with it.
        self.processes['compute-2'].may_die = True
        self.processes['compute-2'].stop(signal.SIGKILL)

        def failed():
            found = self.client.get(self.ctxt, migration['id'])
            return found if found['status'] == states.ERROR else None
        found = self.wait_until(failed, what='the healer to fail it')
        self.assertTrue(found['recovery_needed'])
        self.assertIn('is down', found['error_reason'])

        code, _, err = self.manage('migration', 'recover', migration['id'])
        self.assertEqual(1, code)
        self.assertIn('say which volume the server keeps', err)
        code, out, _ = self.manage('migration', 'recover', migration['id'],
                                   '--to', 'src')
        self.assertEqual(0, code)
        recovered = self.client.get(self.ctxt, migration['id'])
        self.assertFalse(recovered['recovery_needed'])
        self.assertIn('Recovered: the guest is on src',
                      recovered['error_reason'])
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual(bdm['attachment_id'],
                         server['block_devices'][0]['attachment_id'])
        self.assertIsNone(server['task_state'])

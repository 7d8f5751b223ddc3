"""``volmig-status upgrade check``, run as the operator runs it."""

import json
import os
import subprocess

from oslo_utils import uuidutils
from oslotest import base

from tests import fixtures as volmig_fixtures
from tests.integration import cluster
from volmig import context as volmig_context
from volmig import signing
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conf import CONF
from volmig.db import api as db_api
from volmig.db import host_keys
from volmig.db import schema as schema
from volmig.db import services as service_db


class UpgradeCheckTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(volmig_fixtures.ConfFixture())
        self.useFixture(volmig_fixtures.DatabaseFixture())
        self.options = {('database', 'connection'): CONF.database.connection,
                        ('signing', 'key_file'): conf.key_file}
        self.config = cluster.write_config(
            os.path.join(conf.state_path, 'volmig.conf'), self.options)
        self.admin = volmig_context.get_admin_context()

    def _check(self) -> tuple[int, str]:
        """The exit code, and each check's details (JSON output)."""
        result = subprocess.run(
            [os.path.join(cluster.BIN_DIR, 'volmig-status'),
             '--config-file', self.config, 'upgrade', 'check', '--json'],
            capture_output=True, text=True, timeout=60)
        self.assertNotIn('Traceback', result.stdout + result.stderr)
        checks = json.loads(result.stdout)['checks']
        return result.returncode, '\n'.join(
            '%s: %s' % (check['check'], check['details'])
            for check in checks)

    def _compute(self, host, version):
        service_db.update(self.admin, compute_rpcapi.BINARY, host,
                              compute_rpcapi.TOPIC, version, {})

    def test_a_ready_deployment(self):
        self._compute('compute-1', compute_rpcapi.RPC_API_VERSION)
        host_keys.register(signing.COMPUTE, 'compute-1')
        code, out = self._check()
        self.assertEqual(0, code, out)
        self.assertIn('1 compute agent(s), none older than', out)
        self.assertIn('1 host(s) hold a key of their own', out)

    def test_a_host_without_a_key_warns(self):
        for host in ('compute-1', 'compute-2'):
            self._compute(host, compute_rpcapi.RPC_API_VERSION)
        host_keys.register(signing.COMPUTE, 'compute-1')
        code, out = self._check()
        self.assertEqual(1, code, out)
        self.assertIn('No key is recorded for volmig-compute on compute-2: '
                      'their messages are refused', out)

    def test_signing_left_open_warns_and_a_missing_key_fails(self):
        self._compute('compute-1', compute_rpcapi.RPC_API_VERSION)
        self.options[('signing', 'allow_unsigned')] = True
        cluster.write_config(self.config, self.options)
        code, out = self._check()
        self.assertEqual(1, code, out)
        self.assertIn('allow_unsigned is on', out)
        self.options[('signing', 'key_file')] = self.config + '.none'
        cluster.write_config(self.config, self.options)
        code, out = self._check()
        self.assertEqual(2, code, out)
        self.assertIn('volmig-manage key create', out)

    def test_a_compute_older_than_the_previous_release(self):
        self._compute('compute-1', compute_rpcapi.RPC_API_VERSION)
        self._compute('compute-old', '1.0')
        code, out = self._check()
        self.assertEqual(2, code, out)
        self.assertIn('compute-old (RPC 1.0)', out)
        self.assertIn('volmig-compute: 1.0, %s'
                      % compute_rpcapi.RPC_API_VERSION, out)

    def test_mixed_versions_within_the_previous_release_warn(self):
        self._compute('compute-1', compute_rpcapi.RPC_API_VERSION)
        self._compute('compute-2', compute_rpcapi.VERSION_ALIASES['2027.1'])
        code, out = self._check()
        self.assertEqual(1, code, out)
        self.assertIn('A rolling upgrade is unfinished', out)

    def test_a_migration_needing_recovery(self):
        migration = db_api.migration_create(self.admin, {
            'uuid': uuidutils.generate_uuid(),
            'instance_uuid': uuidutils.generate_uuid(),
            'volume_id': uuidutils.generate_uuid(),
            'src_attachment_id': uuidutils.generate_uuid(),
            'host': 'compute-1', 'mode': 'live'})
        db_api.migration_update(
            self.admin, migration['id'],
            {'status': states.ERROR, 'error_phase': 'switch',
             'recovery_needed': True}, expected_status=states.ACCEPTED)
        code, out = self._check()
        self.assertEqual(2, code, out)
        self.assertIn(migration['id'], out)
        self.assertIn('volmig-manage migration recover', out)

    def test_a_schema_behind_this_release(self):
        with db_api.get_engine().begin() as connection:
            connection.exec_driver_sql(
                "UPDATE alembic_version SET version_num = '0004'")
        code, out = self._check()
        self.assertEqual(2, code, out)
        self.assertIn('The database schema is at 0004; this release needs '
                      '%s. Run "volmig-manage db sync"'
                      % schema.head_revision(), out)

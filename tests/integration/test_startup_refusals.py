"""A service refuses to start on a configuration that would lose data."""

import os
import subprocess

import fixtures
from oslotest import base

from tests.integration import cluster


class ComputeDriverRequiredTest(base.BaseTestCase):

    def _start(self, options: dict) -> subprocess.CompletedProcess:
        state = self.useFixture(fixtures.TempDir()).path
        options.update({
            ('DEFAULT', 'state_path'): state,
            ('DEFAULT', 'transport_url'): 'fake://',
            ('database', 'connection'): 'sqlite:///%s/db.sqlite' % state})
        config = cluster.write_config(os.path.join(state, 'volmig.conf'),
                                      options)
        return subprocess.run(
            [os.path.join(cluster.BIN_DIR, 'volmig-compute'),
             '--config-file', config], capture_output=True, text=True,
            timeout=60)

    def test_no_driver_set(self):
        result = self._start({('DEFAULT', 'host'): 'refusing'})
        self.assertEqual(1, result.returncode)
        self.assertIn('volmig-compute refuses to start: [compute] driver is '
                      'not set. Set it to "qemu"', result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_unknown_driver(self):
        result = self._start({('compute', 'driver'): 'libvirt'})
        self.assertEqual(1, result.returncode)
        self.assertIn('[compute] driver "libvirt" is not one of: fake, '
                      'qemu', result.stderr)
        self.assertNotIn('Traceback', result.stderr)

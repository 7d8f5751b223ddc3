"""The README's first command, as a process: the demo's live migration of
a volume under a writing guest, on the embedded default; and the same
story on the libvirt driver."""

import os
import subprocess

import fixtures
from oslotest import base

from tests import libvirt_daemon
from tests import real_guest
from tests.integration import cluster

# The command runs from the checkout, as the README has it.
ROOT = os.path.dirname(os.path.dirname(real_guest.BUILD))


class DemoTest(base.BaseTestCase):

    def demo(self, *options: str) -> str:
        """volmig-demo's output; it must say YES and exit 0."""
        state = self.useFixture(fixtures.TempDir()).path
        result = subprocess.run(
            [os.path.join(cluster.BIN_DIR, 'volmig-demo'), '--state-dir',
             state, *options], capture_output=True, text=True, timeout=600,
            check=False, cwd=ROOT)
        output = result.stdout + result.stderr
        self.assertEqual(0, result.returncode, output)
        self.assertIn('every acknowledged block is on pool-b: YES', output)
        self.assertIn('copy verified by volmig-volume: sha256', output)
        # The guest's gaps, window by window.
        for window in ('before the migration', 'around the start',
                       'during the copy', 'around the switch'):
            self.assertRegex(output, r'\n  %s +[0-9.]+ / +[0-9.]+\n'
                             % window)
        # Nothing for a new user to worry about: no warning, no traceback.
        self.assertNotIn('WARNING', output)
        self.assertNotIn('Traceback', output)
        return output

    def test_the_demo_says_yes_and_nothing_else_worries(self):
        output = self.demo()
        self.assertIn('(the QMP call)', output)

    def test_the_demo_on_libvirt(self):
        reason = libvirt_daemon.unavailable()
        if reason:
            self.skipTest(reason)
        self.useFixture(libvirt_daemon.Libvirtd())
        output = self.demo('--driver', 'libvirt')
        self.assertIn('(the libvirt call)', output)

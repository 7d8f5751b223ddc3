"""What each layer may import: the API knows no compute driver."""

import subprocess  # nosec B404
import sys

from oslotest import base

PROBE = '''
import sys
import volmig.api.manager
import volmig.api.rest.app
print("\\n".join(sorted(sys.modules)))
'''


class LayersTest(base.BaseTestCase):

    def test_the_api_imports_no_compute_driver(self):
        # A fresh interpreter: this one may hold drivers from other tests.
        loaded = subprocess.run([sys.executable, '-c', PROBE],
                                capture_output=True, text=True, check=True,
                                timeout=120).stdout.split()
        self.assertIn('volmig.api.rest.schemas.servers', loaded)
        self.assertEqual([], [name for name in loaded
                              if name.startswith('volmig.compute.drivers')])

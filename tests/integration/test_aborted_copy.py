"""An operator aborts a migration while volmig-volume copies the volume of
a running guest on the qemu driver: the copy stops at its next check, dst
is deleted, and every write the guest acknowledged is on src, which the
guest keeps using. Then the same volume moves again, to its end."""

import glob
import os

from tests.integration import real_guest_base
from tests.integration import test_pool_drain


class AbortedCopyTest(real_guest_base.RealGuestTestCase):

    def options(self):
        options = super().options()
        # 16 MiB of data at 1 MiB/s: the copy runs for about 16 s.
        options[('storage', 'max_bandwidth_mbps')] = 1
        return options

    def test_an_abort_stops_the_copy_and_the_volume_moves_again(self):
        vol = self.volume()
        test_pool_drain.fill(self.path(vol['id']), 16, 16)
        server = self.boot([vol])
        self.wait_for_acks(server, vol['id'], 10)
        code, body = self.migrate(vol['id'])
        self.assertEqual(202, code, body)
        [migration_id] = body['migration_ids']
        self.wait_until(
            lambda: self.volume_status(vol['id'])['migration_progress'],
            timeout=60, what='the copy to begin')
        code, body = self.rest(
            'POST', '/os-volume-migrations/%s/action' % migration_id,
            {'abort': None})
        self.assertEqual(202, code, body)
        volume = self.wait_until(
            lambda: (lambda v: v if v['migration_status'] == 'error'
                     else None)(self.volume_status(vol['id'])),
            timeout=60, what='the copy to stop')
        self.assertIn('so its copy stopped', volume['migration_error'])
        self.assertLess(volume['migration_progress'], 100)
        self.assertEqual('pool-a', volume['pool'])
        self.assertEqual([], glob.glob(os.path.join(self.state_path,
                                                    'pool-b', '*')))
        # The guest is back on src and writes on; the same volume then
        # moves to its end.
        before = len(self.acks(server, vol['id']))
        self.wait_for_acks(server, vol['id'], before + 5)
        code, body = self.migrate(vol['id'])
        self.assertEqual(202, code, body)
        self.assertEqual('success', self.wait_migrated(
            vol['id'])['migration_status'])
        self.stop(server)
        self.assert_acked_on(self.path(vol['id']),
                             self.acks(server, vol['id']))
        self.assertIn('/pool-b/', self.path(vol['id']))

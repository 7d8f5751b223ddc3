"""An attach racing a volume's move to another pool, many times over.

volmig-volume on real files, the conductor and an agent in this process
(fake guests that keep the connection info they were given). After each
round the invariants are checked, not just the answers: every guest's
disk is a file that exists and is the volume's current one, no attachment
is left half made, and no answer carries a traceback.
"""

import functools
import os
import time

from tests.functional import base
from tests.functional import test_races
from volmig import exception
from volmig import states

ROUNDS = 20
TRANSIENT = ('reserved', 'attaching', 'detaching')


class MoveRaceTest(base.FileVolumesTestCase):

    def wait_moved(self, volume_id):
        return self.wait_until(
            lambda: (lambda v: v if v['migration_status'] not in (
                'queued', 'starting', 'migrating') else None)(
                    self.volumes.get_volume(self.admin, volume_id)),
            what='the move of volume %s to end' % volume_id)

    @staticmethod
    def after(delay, call, *args):
        time.sleep(delay)
        return call(*args)

    def assert_refusal(self, result):
        """A refusal is a 4xx that names the problem, no traceback."""
        self.assertIsInstance(result, exception.VolmigException)
        self.assertLess(result.code, 500, result.message)
        self.assertNotIn('Traceback', result.message)

    def assert_invariants(self, volume_id):
        volume = self.volumes.get_volume(self.admin, volume_id)
        self.assertEqual([], [a for a in volume['attachments']
                              if a['attach_status'] in TRANSIENT])
        self.assertTrue(os.path.exists(volume['path']), volume)
        holders = {a['instance_uuid'] for a in volume['attachments']}
        for uuid in holders:
            # Its migration commits after the volume moved: then it ends.
            server = self.wait_for_server(uuid, states.VM_ACTIVE)
            disk = self.fake_disk(server, {'volume_id': volume_id})
            self.assertEqual(volume['path'],
                             disk.connection_info['data']['path'])
            self.assertFalse(disk.on_overlay)
        return volume, holders

    def test_an_attach_racing_a_move_is_in_it_or_refused(self):
        [other] = self.conductor.build_instances(self.user, 'other', [], 1,
                                                 None)
        self.wait_for_server(other['uuid'], states.VM_ACTIVE)
        outcomes = set()
        for round_ in range(ROUNDS):
            server, bdm = self.create_server(multiattach=True,
                                             attach_mode='ro')
            volume_id = bdm['volume_id']
            target = ('pool-b', 'pool-a')[round_ % 2]
            if self.volumes.get_volume(self.admin,
                                       volume_id)['pool'] == target:
                target = 'pool-a' if target == 'pool-b' else 'pool-b'
            # Each round lets one side run a little further first, so
            # that the other meets every step of it.
            head_start = round_ // 2 % 5 * 0.02
            move, attach = test_races.race(
                functools.partial(self.after, head_start * (round_ % 2),
                                  self.volumes.migrate_volume, self.admin,
                                  volume_id, target),
                functools.partial(self.after, head_start * (1 - round_ % 2),
                                  self.conductor.attach_volume, self.user,
                                  other['uuid'], volume_id, 'ro'))
            for result in (move, attach):
                if isinstance(result, Exception):
                    self.assert_refusal(result)
            moved = self.wait_moved(volume_id)
            volume, holders = self.assert_invariants(volume_id)
            attached = not isinstance(attach, Exception)
            self.assertEqual(attached, other['uuid'] in holders)
            if not isinstance(move, Exception):
                self.assertEqual(('success', target),
                                 (moved['migration_status'],
                                  moved['pool']), moved)
            outcomes.add((isinstance(move, Exception), attached))
        # Neither side may simply always lose: both orders happened.
        self.assertNotIn((True, False), outcomes)

"""The end of Cinder's migration of an attached volume, deterministically:
Cinder 29.0.0's completion sometimes deletes an attachment it has not
moved onto the volume's id yet (it casts the delete of the old data
first). The conductor attaches the server again, so that every guest
still has its attachment. Cinder cannot run in a unit test, so its
completion is played at the adapter, the boundary."""

from oslo_utils import uuidutils

from tests.unit import test_migration_conductor
from volmig import exception
from volmig import states
from volmig.block_storage import fake
from volmig.conductor import cinder_moves as moves
from volmig.db import cinder_moves as records
from volmig.db import instances as instances_db


class Cinder(fake.FakeVolumeAdapter):
    """Completes as Cinder 29.0.0 does, losing the attachments when told
    to: the race that the real Cinder loses now and then. As Cinder, it
    still counts an attachment it lost until told that it is detached,
    and reserves a single-attach volume it counts in use for no other."""

    def __init__(self, conf=None):
        self.completions = []
        self.loses_attachments = False
        # (volume id, attachment id) deleted but still counted.
        self.lost = set()
        self.connects_to_fail = 0

    def migrate_volume_completion(self, ctxt, volume_id, new_volume_id,
                                  error):
        self.completions.append((volume_id, new_volume_id, error))
        volume = self.get_volume(ctxt, volume_id)
        if self.loses_attachments:
            for attachment in volume['attachments']:
                self.attachment_delete(ctxt, attachment['id'])
                self.lost.add((volume_id, attachment['id']))
        self.update_volume(volume_id, migration_status='success')

    def mark_detached(self, ctxt, volume_id, attachment_id):
        self.lost.discard((volume_id, attachment_id))

    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        if (not self.get_volume(ctxt, volume_id)['multiattach']
                and any(lost[0] == volume_id for lost in self.lost)):
            # Cinder's words.
            raise exception.BlockStorageRefused(
                action='reserve a volume', reason='Invalid volume: Volume '
                '%s status must be available or downloading to reserve, '
                'but the current status is in-use.' % volume_id)
        return super().attachment_create(ctxt, volume_id, instance_uuid,
                                         mode)

    def attachment_update(self, ctxt, attachment_id, connector):
        if self.connects_to_fail:
            self.connects_to_fail -= 1
            raise exception.BlockStorageUnavailable(
                action='connect an attachment', reason='cinder-api is gone')
        return super().attachment_update(ctxt, attachment_id, connector)


class MoveCompletionTest(test_migration_conductor.ConductorTestBase):

    def make_volumes(self):
        return Cinder()

    def setUp(self):
        super().setUp()
        self.bdm = instances_db.bdm_get_by_attachment(self.ctxt,
                                                      self.src['id'])
        self.volume_id = self.bdm['volume_id']
        self.mover = moves.CinderMoves(self.volumes, None, 'c1')
        # The move is at its last step: every guest on the new data, which
        # carries the volume's id; the old attachment is gone.
        move = records.add_request(
            self.ctxt, self.volume_id, uuidutils.generate_uuid(),
            uuidutils.generate_uuid(),
            {'instance_uuid': self.instance['uuid'], 'host': 'h1',
             'attach_mode': 'rw'}, states.MOVE_REQUESTED)
        for old, new in ((states.MOVE_REQUESTED, states.MOVE_STARTING),
                         (states.MOVE_STARTING, states.MOVE_COPYING),
                         (states.MOVE_COPYING, states.MOVE_COMPLETING),
                         (states.MOVE_COMPLETING, states.MOVE_RELEASING),
                         (states.MOVE_RELEASING, states.MOVE_NOTIFYING)):
            move = records.update(self.ctxt, move['id'], old, status=new)
        self.move = move

    def attachments(self):
        return self.volumes.get_volume(self.ctxt,
                                       self.volume_id)['attachments']

    def test_an_attachment_cinder_lost_is_made_again(self):
        self.volumes.loses_attachments = True
        done = self.mover._notifying(self.ctxt, self.move)
        self.assertEqual(states.MOVE_DONE, done['status'])
        self.assertEqual([(self.volume_id, self.move['new_volume_id'],
                           False)], self.volumes.completions)
        [attachment] = self.attachments()
        self.assertNotEqual(self.src['id'], attachment['id'])
        self.assertEqual((self.instance['uuid'], 'attached', 'rw'),
                         (attachment['instance_uuid'],
                          attachment['attach_status'],
                          attachment['attach_mode']))
        bdm = instances_db.bdm_get_by_attachment(self.ctxt, attachment['id'])
        self.assertEqual(self.bdm['id'], bdm['id'])
        self.assertEqual(self.volume_id,
                         bdm['connection_info']['data']['volume_id'])

    def test_a_resumed_step_neither_calls_nor_attaches_twice(self):
        self.volumes.loses_attachments = True
        self.mover.attachments.tell_cinder(self.ctxt, self.move, error=False)
        self.mover.attachments.keep(self.ctxt, self.move)
        [first] = self.attachments()
        # The conductor died here and runs the step again.
        self.mover._notifying(self.ctxt, self.move)
        self.assertEqual(1, len(self.volumes.completions))
        self.assertEqual([first['id']],
                         [a['id'] for a in self.attachments()])

    def test_a_step_cut_off_before_it_connected_the_new_one_connects_it(
            self):
        self.volumes.loses_attachments = True
        self.volumes.connects_to_fail = 1
        self.assertRaises(exception.BlockStorageUnavailable,
                          self.mover._notifying, self.ctxt, self.move)
        [made] = self.attachments()
        self.assertEqual('reserved', made['attach_status'])
        done = self.mover._notifying(self.ctxt, self.move)
        self.assertEqual(states.MOVE_DONE, done['status'])
        [attachment] = self.attachments()
        self.assertEqual((made['id'], 'attached'),
                         (attachment['id'], attachment['attach_status']))
        self.assertEqual(self.volume_id, instances_db.bdm_get_by_attachment(
            self.ctxt, made['id'])['connection_info']['data']['volume_id'])

    def test_an_attachment_cinder_kept_is_left_alone(self):
        self.mover._notifying(self.ctxt, self.move)
        self.assertEqual([self.src['id']],
                         [a['id'] for a in self.attachments()])
        self.assertEqual(self.src['id'], instances_db.bdm_get_by_attachment(
            self.ctxt, self.src['id'])['attachment_id'])

"""Cinder's migration of an attached volume, around its copy: when the
copy's end of the new volume is connected, and when the conductor looks
at the copy again. The agents and volmig-api's face are played by stubs
that record what they were asked; Cinder by the fake adapter."""

from oslo_utils import uuidutils
from oslotest import base

from tests.unit import test_migration_conductor
from volmig import states
from volmig.block_storage import fake
from volmig.conductor import cinder_moves as moves
from volmig.db import cinder_moves as records


class NextLookTest(base.BaseTestCase):

    def test_a_copy_without_a_pace_yet_is_looked_at_on_the_beat(self):
        self.assertEqual(moves.COPY_POLL_INTERVAL, moves.next_look(
            {'done': 0, 'total': 1000}, (10.0, 0), 10.0))
        self.assertEqual(moves.COPY_POLL_INTERVAL, moves.next_look(
            {'done': 500, 'total': 1000}, (10.0, 500), 11.0))

    def test_a_copy_far_from_its_end_is_looked_at_on_the_beat(self):
        # 100 bytes a second, 900 left.
        self.assertEqual(moves.COPY_POLL_INTERVAL, moves.next_look(
            {'done': 100, 'total': 1000}, (10.0, 0), 11.0))

    def test_a_copy_near_its_end_is_looked_at_as_it_ends(self):
        # 900 bytes a second since the first look, 90 left: 0.1 s.
        self.assertAlmostEqual(0.1, moves.next_look(
            {'done': 910, 'total': 1000}, (10.0, 10), 11.0))

    def test_a_copy_checking_its_last_bytes_is_looked_at_often(self):
        self.assertEqual(moves.SWITCH_POLL_INTERVAL, moves.next_look(
            {'done': 1000, 'total': 1000}, (10.0, 0), 11.0))


class Cinder(fake.FakeVolumeAdapter):

    def __init__(self, conf=None):
        self.connects = []

    def attachment_update(self, ctxt, attachment_id, connector):
        self.connects.append((attachment_id, connector['host']))
        return super().attachment_update(ctxt, attachment_id, connector)


class Starts:
    """volmig-api's face: each start is under way at once, and the waits
    for its end see what Cinder has of the new volume's attachment."""

    def __init__(self, test):
        self.test = test
        self.seen = []

    def start(self, ctxt, src_id, wait):
        return {'id': 'migration-of-' + src_id}

    def wait_for(self, ctxt, migration_id, status, timeout):
        self.seen.append(records.get(ctxt, self.test.move['id'])[
            'attachments'][self.test.src['id']].get('dst_connection_info'))


class Copies:
    """The agent: it has forgotten the copy at the first look, and it is
    done at the next."""

    def __init__(self):
        self.copies = []

    def volume_copy_status(self, ctxt, host, copy_id):
        if not self.copies:
            return {'state': 'unknown'}
        return {'state': 'done', 'checksum': 'sum', 'done': 1, 'total': 1}

    def volume_copy(self, ctxt, host, copy_id, src_info, dst_info):
        self.copies.append(dst_info)


class CopyEndTest(test_migration_conductor.ConductorTestBase):

    def make_volumes(self):
        return Cinder()

    def setUp(self):
        super().setUp()
        new = self.volumes.create_volume(self.ctxt, 16)
        self.move = records.add_request(
            self.ctxt, self.src['volume_id'], new['id'], self.src['id'],
            {'instance_uuid': self.instance['uuid'], 'host': 'h1',
             'attach_mode': 'rw'}, states.MOVE_REQUESTED)
        self.move = records.update(self.ctxt, self.move['id'],
                                   states.MOVE_REQUESTED,
                                   status=states.MOVE_STARTING, owner='c1')
        self.mover = moves.CinderMoves(self.volumes, Copies(), 'c1')
        self.mover._client = Starts(self)

    def test_the_new_volume_is_connected_while_the_start_runs(self):
        copying = self.mover._starting(self.ctxt, self.move)
        self.assertEqual(states.MOVE_COPYING, copying['status'])
        [seen] = self.mover.client.seen
        self.assertIsNotNone(seen)
        dst_id = copying['attachments'][self.src['id']]['dst_attachment_id']
        self.assertEqual([(dst_id, 'h1')], self.volumes.connects)
        # The copy takes the connection made then; connecting again would
        # cost Cinder's time on the copy's path.
        completing = self.mover._copying(self.ctxt, copying)
        self.assertEqual(states.MOVE_COMPLETING, completing['status'])
        self.assertEqual([(dst_id, 'h1')], self.volumes.connects)
        self.assertEqual([seen], self.mover.compute_api.copies)

    def test_a_move_resumed_before_its_connection_connects_it(self):
        copying = records.update(self.ctxt, self.move['id'],
                                 states.MOVE_STARTING,
                                 status=states.MOVE_COPYING,
                                 copy_host='h1')
        self.mover._copying(self.ctxt, copying)
        [(dst_id, host)] = self.volumes.connects
        self.assertEqual('h1', host)
        self.assertTrue(uuidutils.is_uuid_like(dst_id))
        [dst_info] = self.mover.compute_api.copies
        self.assertEqual(self.volumes.attachment_get(
            self.ctxt, dst_id)['connection_info'], dst_info)

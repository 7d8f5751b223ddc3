"""Which path each volume of a Cinder backend takes, given Nova's
servers: ``volmig.nova.paths.classify``."""

from oslotest import base

from volmig.nova import paths

RUNNING = {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None}
STOPPED = {'status': 'SHUTOFF', 'OS-EXT-STS:task_state': None}


def volume(*attachments, migration_status=None):
    """A volume attached to (server, mode) pairs."""
    return {'id': 'vol-1', 'migration_status': migration_status,
            'attachments': [{'id': 'att-%s' % server,
                             'instance_uuid': server, 'attach_mode': mode}
                            for server, mode in attachments]}


class ClassifyTest(base.BaseTestCase):

    def path(self, vol, servers, own=frozenset()):
        return paths.classify(vol, servers, own)[0]

    def test_detached_is_cinders_own_copy(self):
        self.assertEqual(paths.COPY, self.path(volume(), {}))

    def test_one_running_server_goes_through_novas_swap(self):
        action, reason = paths.classify(volume(('s1', 'rw')),
                                        {'s1': RUNNING})
        self.assertEqual(paths.SWAP, action)
        self.assertIn('running server s1', reason)

    def test_paused_server_also_swaps(self):
        self.assertEqual(paths.SWAP, self.path(
            volume(('s1', 'rw')), {'s1': dict(RUNNING, status='PAUSED')}))

    def test_stopped_server_moves_offline(self):
        self.assertEqual(paths.OFFLINE, self.path(volume(('s1', 'rw')),
                                                  {'s1': STOPPED}))

    def test_read_write_on_two_servers_is_refused_stopped_or_not(self):
        for states in ((RUNNING, RUNNING), (STOPPED, STOPPED)):
            action, reason = paths.classify(
                volume(('s1', 'rw'), ('s2', 'rw')),
                dict(zip(('s1', 's2'), states, strict=True)))
            self.assertEqual(paths.NONE, action)
            self.assertIn('read/write', reason)

    def test_one_writer_and_one_reader_is_refused(self):
        self.assertEqual(paths.NONE, self.path(
            volume(('s1', 'rw'), ('s2', 'ro')),
            {'s1': STOPPED, 's2': STOPPED}))

    def test_read_only_on_running_servers_is_refused(self):
        action, reason = paths.classify(volume(('s1', 'ro'), ('s2', 'ro')),
                                        {'s1': RUNNING, 's2': STOPPED})
        self.assertEqual(paths.NONE, action)
        self.assertIn('1 running', reason)
        self.assertIn('stop them all', reason)

    def test_read_only_on_stopped_servers_moves_offline(self):
        self.assertEqual(paths.OFFLINE, self.path(
            volume(('s1', 'ro'), ('s2', 'ro')),
            {'s1': STOPPED, 's2': STOPPED}))

    def test_volmig_guest_is_refused_with_its_name(self):
        action, reason = paths.classify(volume(('g1', 'rw')), {'g1': None},
                                        frozenset({'g1'}))
        self.assertEqual(paths.NONE, action)
        self.assertIn("volmig's guest g1", reason)

    def test_shared_with_a_volmig_guest_is_refused(self):
        action, reason = paths.classify(
            volume(('s1', 'ro'), ('g1', 'ro')), {'s1': STOPPED, 'g1': None},
            frozenset({'g1'}))
        self.assertEqual(paths.NONE, action)
        self.assertIn('as well as', reason)

    def test_unknown_attachment_is_refused(self):
        action, reason = paths.classify(volume(('x', 'rw')), {'x': None})
        self.assertEqual(paths.NONE, action)
        self.assertIn('no server of Nova nor a guest of volmig', reason)

    def test_server_in_a_task_is_refused(self):
        action, reason = paths.classify(volume(('s1', 'rw')), {
            's1': dict(RUNNING, **{'OS-EXT-STS:task_state': 'rebooting'})})
        self.assertEqual(paths.NONE, action)
        self.assertIn('rebooting', reason)

    def test_server_in_error_is_refused(self):
        self.assertEqual(paths.NONE, self.path(
            volume(('s1', 'rw')), {'s1': dict(RUNNING, status='ERROR')}))

    def test_migrating_volume_is_refused(self):
        self.assertEqual(paths.NONE, self.path(
            volume(migration_status='migrating'), {}))

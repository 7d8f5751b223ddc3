"""A guest QEMU's user and the files passed to it (no QEMU here: the
integration test ``test_confinement`` runs real ones)."""

import os
from unittest import mock

import fixtures
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import exception
from volmig.compute.drivers.qemu import confinement
from volmig.conf import CONF


class PickUidTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(volmig_fixtures.ConfFixture())
        conf.conf(group='qemu', guest_uid_start=5000, guest_uid_count=3)
        self.useFixture(fixtures.MockPatchObject(
            confinement, 'can_switch_users', return_value=True))

    def test_the_first_free_uid(self):
        self.assertEqual(5000, confinement.pick_uid(CONF, {None}))
        self.assertEqual(5001, confinement.pick_uid(CONF, {5000, 5002}))

    def test_a_full_range_is_refused_with_its_bounds(self):
        error = self.assertRaises(exception.DriverError,
                                  confinement.pick_uid, CONF,
                                  {5000, 5001, 5002})
        self.assertIn('guest_uid_start 5000 and the 3', str(error))

    def test_no_switch_no_uid(self):
        confinement.can_switch_users.return_value = False
        self.assertIsNone(confinement.pick_uid(CONF, set()))

    def test_libvirtd_switches_where_the_agent_cannot(self):
        confinement.can_switch_users.return_value = False
        self.assertEqual(5000, confinement.pick_uid(CONF, set(),
                                                    by_agent=False))


class PassedFilesTest(base.BaseTestCase):

    def test_fd_sets_map_to_their_paths(self):
        guest = mock.Mock()
        guest.execute.return_value = [
            {'fdset-id': 0, 'fds': [{'fd': 8, 'opaque': '/g/console.log'}]},
            {'fdset-id': 3, 'fds': [{'fd': 20, 'opaque': '/pool/v1'}]},
            {'fdset-id': 4, 'fds': [{'fd': 21}]}]
        self.assertEqual({'/dev/fdset/0': '/g/console.log',
                          '/dev/fdset/3': '/pool/v1'},
                         confinement.file_paths(guest))

    def test_unused_sets_are_released_but_not_the_console_log(self):
        guest = mock.MagicMock()
        replies = {
            'query-named-block-nodes': [{'file': '/dev/fdset/3'},
                                        {'file': '/old/path/v2'}],
            'query-fdsets': [{'fdset-id': n, 'fds': []} for n in (0, 3, 5)],
            'remove-fd': {}}
        guest.execute.side_effect = lambda command, **kw: replies[command]
        confinement.release_files(guest)
        guest.execute.assert_any_call('remove-fd', **{'fdset-id': 5})
        removed = [call for call in guest.execute.call_args_list
                   if call.args[0] == 'remove-fd']
        self.assertEqual(1, len(removed))

    def test_a_file_is_passed_open_and_closed_here(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'v')
        open(path, 'w').close()
        passed = []

        def execute(command, fd=None, **arguments):
            passed.append((command, os.readlink('/proc/self/fd/%d' % fd),
                           arguments))
            return {'fdset-id': 7, 'fd': 30}

        guest = mock.Mock(execute=execute)
        self.assertEqual('/dev/fdset/7',
                         confinement.pass_file(guest, path, read_only=True))
        self.assertEqual([('add-fd', path, {'opaque': path})], passed)

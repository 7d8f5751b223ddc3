"""Every argument of ``volmig`` says what it is for."""

from oslotest import base

from volmig.cli import app


class CLIHelpTest(base.BaseTestCase):

    def test_every_argument_has_help(self):
        volmig = app.VolmigApp()
        missing = [('volmig', action.dest)
                   for action in volmig.parser._actions if not action.help]
        commands = sorted(volmig.command_manager)
        self.assertIn('volume migrate', [name for name, _ in commands])
        for name, entry_point in commands:
            parser = entry_point.load()(volmig, None).get_parser(
                'volmig ' + name)
            missing += [(name, action.dest) for action in parser._actions
                        if not action.help]
        self.assertEqual([], missing)

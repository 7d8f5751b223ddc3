"""The command lines: every argument says what it is for, openstackclient
and ``volmig`` load the same command classes, and the plugin's hooks."""

import argparse
from unittest import mock

import fixtures
from osc_lib import exceptions
from oslotest import base
import stevedore

from volmig.api.rest import microversion
from volmig.cli import app
from volmig.cli import client
from volmig.cli import plugin

PLUGIN_GROUP = 'openstack.%s.v2' % plugin.API_NAME


def commands(group: str) -> dict:
    """{command name: its class} of an entry-point group."""
    return {extension.name.replace('_', ' '): extension.plugin
            for extension in stevedore.ExtensionManager(group)}


class CLIHelpTest(base.BaseTestCase):

    def test_every_argument_has_help(self):
        volmig = app.VolmigApp()
        missing = [('volmig', action.dest)
                   for action in volmig.parser._actions if not action.help]
        for group in ('volmig.cli', PLUGIN_GROUP):
            for name, command in sorted(commands(group).items()):
                parser = command(volmig, None).get_parser(name)
                missing += [(name, action.dest) for action in
                            parser._actions if not action.help]
        self.assertEqual([], missing)

    def test_both_command_lines_run_the_same_classes(self):
        volmig, openstack = commands('volmig.cli'), commands(PLUGIN_GROUP)
        self.assertIn('volume migration force complete', openstack)
        self.assertIn('volume pool drain start', openstack)
        # volmig's own objects take its name in openstackclient, whose
        # "server" and "volume" are Nova's and Cinder's.
        self.assertEqual(
            volmig, {name.removeprefix('volmig '): command
                     for name, command in openstack.items()})
        self.assertEqual([], [name for name in openstack if name.startswith(
            ('server ', 'service ', 'volume create', 'volume list'))])

    def test_the_old_names_lead_to_commands_that_exist(self):
        self.assertEqual([], [new for new in app.LEGACY.values()
                              if new not in commands('volmig.cli')])


class PluginTest(base.BaseTestCase):

    def test_the_client_is_built_on_openstackclients_session(self):
        instance = mock.Mock(region_name='RegionTwo', interface='internal',
                             _api_version={plugin.API_NAME: '2.61'})
        instance.get_endpoint_for_service_type.return_value = (
            'http://volmig.example/v2.1/')
        made = plugin.make_client(instance)
        instance.get_endpoint_for_service_type.assert_called_once_with(
            'compute', region_name='RegionTwo', interface='internal')
        self.assertIs(instance.session, made.session)
        self.assertEqual('http://volmig.example/v2.1', made.endpoint)
        self.assertEqual('compute 2.61', made.headers['OpenStack-API-Version'])

    def test_a_catalog_without_volmig_api_is_one_plain_error(self):
        instance = mock.Mock(region_name=None, interface='internal',
                             _api_version={plugin.API_NAME: '2.89'})
        instance.get_endpoint_for_service_type.return_value = None
        error = self.assertRaises(exceptions.CommandError,
                                  plugin.make_client, instance)
        self.assertEqual('the catalog has no compute endpoint (internal '
                         'interface) for volmig-api', str(error))

    def test_the_version_option_and_its_environment_variable(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_VOLUME_MIGRATION_API_VERSION', '2.60'))
        parser = plugin.build_option_parser(argparse.ArgumentParser())
        self.assertEqual('2.60', parser.parse_args(
            []).os_volume_migration_api_version)
        self.assertEqual('2.1', parser.parse_args(
            ['--os-volume-migration-api-version', '2.1'])
            .os_volume_migration_api_version)

    def test_only_versions_volmig_api_knows(self):
        self.assertTrue(plugin.check_api_version(str(microversion.MIN)))
        self.assertTrue(plugin.check_api_version(plugin.DEFAULT_API_VERSION))
        for wrong in ('2.0', '2.90', '3', 'latest', ''):
            error = self.assertRaises(exceptions.CommandError,
                                      plugin.check_api_version, wrong)
            self.assertEqual('volume migration API version %r is not one of '
                             '2.1 to %s' % (wrong, microversion.MAX),
                             str(error))
        self.assertTrue(issubclass(client.APIError, exceptions.CommandError))

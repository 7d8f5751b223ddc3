"""``volmig``: the command line for those without openstackclient.

It runs the same command classes as the openstackclient plugin
(``volmig.cli.plugin``), with the same global options: clouds.yaml and
the ``OS_*`` variables, or a bare token and endpoint, which is what the
embedded default (noauth2) takes.
"""

import os
import sys

from cliff import app
from cliff import commandmanager
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import openstack.config

from volmig import version
from volmig.api.rest import microversion
from volmig.cli import client
from volmig.cli import plugin

DEFAULT_ENDPOINT = 'http://127.0.0.1:8788/v2.1'
# noauth2's administrator, when no cloud is given.
DEFAULT_TOKEN = 'admin:admin'  # noqa: S105 # nosec

# The names of 0.x, which take the same arguments as the commands that
# replaced them (the release notes list them); they will go.
LEGACY = {'volume migrate': 'volume migration start',
          'migration list': 'volume migration list',
          'migration show': 'volume migration show',
          'migration abort': 'volume migration abort',
          'migration recover': 'volume migration force complete',
          'volume drain-show': 'volume pool drain show',
          'volume drain-list': 'volume pool drain list',
          'volume drain-cancel': 'volume pool drain cancel'}


class ClientManager:
    """What openstackclient's client manager offers these commands."""

    def __init__(self, volume_migration: client.Client):
        self.volume_migration = volume_migration


class VolmigApp(app.App):

    def __init__(self):
        # clouds.yaml and OS_*; read before the parser is built.
        self.clouds = openstack.config.OpenStackConfig()
        commands = commandmanager.CommandManager('volmig.cli')
        for old, new in LEGACY.items():
            commands.add_legacy_command(old, new)
        super().__init__(description='Servers, volumes and live volume '
                                     'migrations through the volmig API.',
                         version=version.version_info.version_string(),
                         command_manager=commands, deferred_help=True)
        self.client_manager: ClientManager | None = None

    def build_option_parser(self, description, version, argparse_kwargs=None):
        parser = super().build_option_parser(description, version,
                                             argparse_kwargs)
        # openstackclient's options: --os-cloud and clouds.yaml, the OS_*
        # variables, any keystoneauth1 plugin (password, application
        # credential, token, ...).
        self.clouds.register_argparse_arguments(parser, sys.argv[1:])
        plugin.build_option_parser(parser)
        parser.add_argument(
            '--os-endpoint', default=os.environ.get('VOLMIG_ENDPOINT'),
            help='The REST API, ending in /v2.1 (env VOLMIG_ENDPOINT). By '
                 'default the %s endpoint of the cloud\'s catalog, or %s '
                 'without Keystone.' % (microversion.SERVICE_TYPE,
                                        DEFAULT_ENDPOINT))
        if '--os-token' not in parser._option_string_actions:
            parser.add_argument(
                '--os-token', default=os.environ.get('VOLMIG_TOKEN'),
                help='A token to send as it is (env VOLMIG_TOKEN): a '
                     'Keystone token, or USER:PROJECT for noauth2. Without '
                     'it or a cloud, noauth2\'s admin:admin.')
        return parser

    def initialize_app(self, argv):
        options = self.options
        api_version = (options.os_volume_migration_api_version
                       or plugin.DEFAULT_API_VERSION)
        keystone = (options.os_cloud or getattr(options, 'os_auth_url', None)
                    or os.environ.get('OS_AUTH_URL'))
        if options.os_token or not keystone:
            endpoint = options.os_endpoint or DEFAULT_ENDPOINT
            session = ks_session.Session(auth=token_endpoint.Token(
                endpoint, options.os_token or DEFAULT_TOKEN), timeout=60)
        else:
            cloud = self.clouds.get_one(argparse=options)
            session = cloud.get_session()
            endpoint = options.os_endpoint or session.get_endpoint(
                service_type=microversion.SERVICE_TYPE,
                interface=cloud.get_interface() or 'public')
        self.client_manager = ClientManager(
            client.Client(endpoint, session, api_version))

    def prepare_to_run_command(self, cmd):
        if cmd.cmd_name in LEGACY:
            self.stderr.write('"volmig %s" is deprecated: use "volmig %s"\n'
                              % (cmd.cmd_name, LEGACY[cmd.cmd_name]))


def main(argv=None) -> int:
    return VolmigApp().run(sys.argv[1:] if argv is None else argv)

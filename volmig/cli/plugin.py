"""volmig's openstackclient plugin: ``openstack volume migration ...``,
``openstack volume pool drain ...`` and ``openstack volmig ...``.

openstackclient finds this module by its ``openstack.cli.extension``
entry point, adds ``--os-volume-migration-api-version`` to its options,
loads the commands of ``openstack.volume_migration.v2``, and builds the
client the first time a command asks ``client_manager`` for it.
"""

from osc_lib import exceptions
from osc_lib import utils

from volmig.api.rest import microversion
from volmig.cli import client

API_NAME = 'volume_migration'
API_VERSION_OPTION = 'os_volume_migration_api_version'
# The newest that this client knows: volmig-api refuses a newer one.
DEFAULT_API_VERSION = str(microversion.MAX)
API_VERSIONS = (DEFAULT_API_VERSION,)


def make_client(instance) -> client.Client:
    """The client on openstackclient's session, at volmig-api's catalog
    entry (its ``compute`` endpoint)."""
    endpoint = instance.get_endpoint_for_service_type(
        microversion.SERVICE_TYPE, region_name=instance.region_name,
        interface=instance.interface)
    if not endpoint:
        # Said plainly: openstackclient would show a missing attribute.
        raise exceptions.CommandError(
            'the catalog has no %s endpoint (%s interface) for volmig-api'
            % (microversion.SERVICE_TYPE, instance.interface or 'public'))
    return client.Client(endpoint, instance.session,
                         instance._api_version[API_NAME])


def build_option_parser(parser):
    parser.add_argument(
        '--os-volume-migration-api-version',
        metavar='<volume-migration-api-version>',
        default=utils.env('OS_VOLUME_MIGRATION_API_VERSION'),
        help='volmig API microversion, %s to %s; default %s (env '
             'OS_VOLUME_MIGRATION_API_VERSION).' % (
                 microversion.MIN, microversion.MAX, DEFAULT_API_VERSION))
    return parser


def check_api_version(version: str) -> bool:
    """A version outside volmig-api's range is refused in a plain line;
    True tells openstackclient that this module checked it."""
    client.check_version(version)
    return True

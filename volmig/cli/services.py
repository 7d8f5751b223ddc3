"""volmig's services, up or down from their heartbeats (admin;
``openstack volmig service list``)."""

from urllib import parse

from osc_lib.command import command

from volmig.cli import client
from volmig.cli import columns

COLUMNS = (('id', 'ID'), ('binary', 'Binary'), ('host', 'Host'),
           ('status', 'Status'), ('state', 'State'), ('version', 'Version'),
           ('updated_at', 'Updated At'),
           ('disabled_reason', 'Disabled Reason'))


class ListServices(command.Lister):
    """List services, with their state from their heartbeats."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--binary', metavar='<binary>',
                            help='Only this service, e.g. volmig-compute.')
        parser.add_argument('--host', metavar='<host>',
                            help='Only those of this host.')
        return parser

    def take_action(self, args):
        filters = {key: value for key, value in (
            ('binary', args.binary), ('host', args.host)) if value}
        return columns.table(COLUMNS, client.of(self).get_all(
                                 '/os-services?' + parse.urlencode(filters),
                                 'services'))

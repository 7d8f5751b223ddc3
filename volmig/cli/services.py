"""``volmig service list``: every host's services, up or down (admin)."""

from urllib import parse

from cliff import lister

COLUMNS = ('id', 'binary', 'host', 'status', 'state', 'version',
           'updated_at', 'disabled_reason')


class ListServices(lister.Lister):
    """List services, with their state from their heartbeats."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--binary',
                            help='Only this service, e.g. volmig-compute.')
        parser.add_argument('--host', help='Only those of this host.')
        return parser

    def take_action(self, args):
        filters = {key: value for key, value in (
            ('binary', args.binary), ('host', args.host)) if value}
        found = self.app.api.get_all(
            '/os-services?' + parse.urlencode(filters), 'services')
        return COLUMNS, [tuple(service.get(column) for column in COLUMNS)
                         for service in found]

"""volmig's own servers (``openstack volmig server ...``;
openstackclient's ``server`` commands are Nova's)."""

from osc_lib.command import command

from volmig.cli import client
from volmig.cli import columns
from volmig.cli import options

# (REST key, column): the list's columns, then those --long adds.
COLUMNS = (('id', 'ID'), ('name', 'Name'), ('status', 'Status'),
           ('volumes', 'Volumes'))
LONG_COLUMNS = (('OS-EXT-STS:task_state', 'Task State'),
                ('OS-EXT-SRV-ATTR:host', 'Host'))


def _volumes(server: dict) -> dict:
    """A server with ``volumes``: each ``VOLUME (MODE)``."""
    return dict(server, volumes=[
        '%s (%s)' % (volume['id'], volume.get('attach_mode', 'rw'))
        for volume in server['os-extended-volumes:volumes_attached']])


class CreateServer(command.Lister):
    """Create servers, optionally sharing volumes (--count)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>',
                            help="The server's name (each of --count "
                                 "servers gets it).")
        parser.add_argument('--volume', action='append', default=[],
                            metavar='<volume>',
                            help='A volume to attach, by name or id; '
                                 'repeat for more.')
        parser.add_argument('--mode', choices=['rw', 'ro'], default='rw',
                            help='Attach mode of the volumes.')
        parser.add_argument('--count', type=int, default=1,
                            metavar='<count>',
                            help='How many servers; they share the '
                                 'volumes, which must be multiattach.')
        parser.add_argument('--host', metavar='<host>',
                            help='Pin to this compute host.')
        parser.add_argument('--image', metavar='<image>',
                            help='Boot this image\'s kernel (see '
                                 '"volmig-manage image list"); without it, '
                                 'the first volume boots through the '
                                 'firmware.')
        return parser

    def take_action(self, args):
        api = client.of(self)
        server = {'name': args.name, 'min_count': args.count,
                  'max_count': args.count,
                  'block_device_mapping_v2': [
                      {'uuid': volume, 'source_type': 'volume',
                       'destination_type': 'volume', 'attach_mode': args.mode,
                       # Booted by an image's kernel, the volumes are all
                       # data disks.
                       'boot_index': (index if index == 0 and not args.image
                                      else None)}
                      for index, volume in enumerate(
                          api.find('volume', ref) for ref in args.volume)]}
        if args.host:
            server['availability_zone'] = 'nova:%s' % args.host
        if args.image:
            server['imageRef'] = args.image
        created = api.post('/servers', {'server': server})
        return columns.table((('id', 'ID'), ('name', 'Name')),
                             created.get('servers', [created['server']]))


class ListServers(command.Lister):
    """List servers."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        options.add_long(parser)
        return parser

    def take_action(self, args):
        found = client.of(self).get_all(
            '/servers/detail', 'servers')
        return columns.table(COLUMNS + (LONG_COLUMNS if args.long else ()),
                             [_volumes(server) for server in found])


class _ServerCommand(command.Command):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help=options.SERVER)
        return parser

    def server(self, args) -> str:
        """The server's id."""
        return client.of(self).find('server',
                                                              args.server)

    def act(self, args, body):
        return client.of(self).post(
            '/servers/%s/action' % self.server(args), body)


class ShowServer(_ServerCommand, command.ShowOne):
    """Show a server."""

    def take_action(self, args):
        return columns.fields(_volumes(
            client.of(self).get(
                '/servers/%s' % self.server(args))['server']))


class DeleteServer(_ServerCommand):
    """Delete a server."""

    def take_action(self, args):
        client.of(self).delete(
            '/servers/%s' % self.server(args))


class StopServer(_ServerCommand):
    """Shut a server off."""

    def take_action(self, args):
        self.act(args, {'os-stop': None})


class StartServer(_ServerCommand):
    """Power a server on."""

    def take_action(self, args):
        self.act(args, {'os-start': None})


class ConsoleLog(_ServerCommand):
    """Print a server's serial console log."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--lines', type=int, default=None,
                            metavar='<count>',
                            help='Only the last N lines.')
        return parser

    def take_action(self, args):
        self.app.stdout.write(self.act(args, {'os-getConsoleOutput': {
            'length': args.lines}})['output'])

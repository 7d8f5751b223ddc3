"""``volmig server ...``."""

from cliff import command
from cliff import lister
from cliff import show

from volmig.cli import app

COLUMNS = ('id', 'name', 'status', 'task_state', 'volumes')


def _row(server: dict) -> tuple:
    volumes = ', '.join(
        '%s (%s)' % (volume['id'], volume.get('attach_mode', 'rw'))
        for volume in server['os-extended-volumes:volumes_attached'])
    return (server['id'], server['name'], server['status'],
            server['OS-EXT-STS:task_state'], volumes)


class CreateServer(lister.Lister):
    """Create servers, optionally sharing volumes (--count)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', help="The server's name (each of "
                                         "--count servers gets it).")
        parser.add_argument('--volume', action='append', default=[],
                            help='A volume to attach, by name or id; '
                                 'repeat for more.')
        parser.add_argument('--mode', choices=['rw', 'ro'], default='rw',
                            help='Attach mode of the volumes.')
        parser.add_argument('--count', type=int, default=1,
                            help='How many servers; they share the '
                                 'volumes, which must be multiattach.')
        parser.add_argument('--host', help='Pin to this compute host.')
        parser.add_argument('--image', help='Boot this image\'s kernel '
                            '(see "volmig-manage image list"); without it, '
                            'the first volume boots through the firmware.')
        return parser

    def take_action(self, args):
        server = {'name': args.name, 'min_count': args.count,
                  'max_count': args.count,
                  'block_device_mapping_v2': [
                      {'uuid': volume, 'source_type': 'volume',
                       'destination_type': 'volume', 'attach_mode': args.mode,
                       'boot_index': index if index == 0 else None}
                      for index, volume in enumerate(
                          self.app.api.find('volume', ref)
                          for ref in args.volume)]}
        if args.host:
            server['availability_zone'] = 'nova:%s' % args.host
        if args.image:
            server['imageRef'] = args.image
            # Booted by its kernel: the volumes are data disks.
            for bdm in server['block_device_mapping_v2']:
                bdm['boot_index'] = None
        created = self.app.api.post('/servers', {'server': server})
        servers = created.get('servers', [created['server']])
        return ('id', 'name'), [(s['id'], s['name']) for s in servers]


class ListServers(lister.Lister):
    """List servers."""

    def take_action(self, args):
        found = self.app.api.get_all('/servers/detail', 'servers')
        return COLUMNS, [_row(server) for server in found]


class ShowServer(show.ShowOne):
    """Show a server."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', help=app.SERVER)
        return parser

    def take_action(self, args):
        server = self.app.api.get('/servers/%s' % self.app.api.find(
            'server', args.server))['server']
        return COLUMNS + ('host',), _row(server) + (
            server.get('OS-EXT-SRV-ATTR:host'),)


class _ServerCommand(command.Command):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', help=app.SERVER)
        return parser

    def server(self, args):
        return self.app.api.find('server', args.server)


class DeleteServer(_ServerCommand):
    """Delete a server."""

    def take_action(self, args):
        self.app.api.delete('/servers/%s' % self.server(args))


class StopServer(_ServerCommand):
    """Shut a server off."""

    def take_action(self, args):
        self.app.api.post('/servers/%s/action' % self.server(args),
                          {'os-stop': None})


class StartServer(_ServerCommand):
    """Power a server on."""

    def take_action(self, args):
        self.app.api.post('/servers/%s/action' % self.server(args),
                          {'os-start': None})


class ConsoleLog(_ServerCommand):
    """Print a server's serial console log."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--lines', type=int, default=None,
                            help='Only the last N lines.')
        return parser

    def take_action(self, args):
        body = {'os-getConsoleOutput': {'length': args.lines}}
        output = self.app.api.post('/servers/%s/action'
                                   % self.server(args), body)['output']
        self.app.stdout.write(output)

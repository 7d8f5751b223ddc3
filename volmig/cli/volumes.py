"""volmig's own volumes: create, list, show and delete them, attach and
detach them, and the legacy swap. (``openstack volmig volume ...``;
openstackclient's ``volume`` commands are Cinder's.)"""

from osc_lib.command import command

from volmig.cli import client
from volmig.cli import columns
from volmig.cli import options

# (REST key, column): the list's columns, then those --long adds.
COLUMNS = (('id', 'ID'), ('displayName', 'Name'), ('status', 'Status'),
           ('size_mb', 'Size (MiB)'), ('pool', 'Pool'),
           ('attachments', 'Attachments'))
LONG_COLUMNS = (('multiattach', 'Multiattach'),
                ('migration_status', 'Migration Status'),
                ('migration_progress', 'Migration Progress'))


def _attachments(volume: dict) -> dict:
    """A volume whose attachments read ``SERVER (MODE)``."""
    return dict(volume, attachments=[
        '%s (%s)' % (a['serverId'], a['attach_mode'])
        for a in volume['attachments']])


class CreateVolume(command.ShowOne):
    """Create a volume."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>', nargs='?',
                            help="The volume's name.")
        size = parser.add_mutually_exclusive_group(required=True)
        size.add_argument('--size', type=int, metavar='<size>',
                          help='Size in GiB.')
        size.add_argument('--size-mb', type=int, metavar='<size-mb>',
                          help='Size in MiB.')
        parser.add_argument('--multiattach', action='store_true',
                            help='Several servers may attach it.')
        parser.add_argument('--pool', metavar='<pool>',
                            help='Where it is made (a volume type with '
                                 'Cinder).')
        return parser

    def take_action(self, args):
        request = {'display_name': args.name,
                   'multiattach': args.multiattach}
        if args.size_mb:
            request['size_mb'] = args.size_mb
        else:
            request['size'] = args.size
        if args.pool:
            request['pool'] = args.pool
        volume = client.of(self).post(
            '/os-volumes', {'volume': request})['volume']
        return columns.fields(volume)


class ListVolumes(command.Lister):
    """List volumes."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        options.add_long(parser)
        return parser

    def take_action(self, args):
        found = client.of(self).get_all(
            '/os-volumes', 'volumes')
        return columns.table(COLUMNS + (LONG_COLUMNS if args.long else ()),
                             [_attachments(volume) for volume in found])


class _VolumeCommand(command.Command):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('volume', metavar='<volume>',
                            help=options.VOLUME)
        return parser

    def path(self, args) -> str:
        """The volume's, found by name or id."""
        return '/os-volumes/%s' % client.of(self).find('volume', args.volume)


class ShowVolume(_VolumeCommand, command.ShowOne):
    """Show a volume and its attachments."""

    def take_action(self, args):
        return columns.fields(client.of(self).get(self.path(args))['volume'])


class DeleteVolume(_VolumeCommand):
    """Delete a volume that has no attachments."""

    def take_action(self, args):
        client.of(self).delete(self.path(args))


class _AttachmentCommand(command.Command):
    """SERVER and VOLUME (by name or id), which become ids."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help=options.SERVER)
        parser.add_argument('volume', metavar='<volume>',
                            help=options.VOLUME)
        return parser

    def resolve(self, args) -> str:
        """The server's attachments' path; names become ids."""
        api = client.of(self)
        args.server = api.find('server', args.server)
        args.volume = api.find('volume', args.volume)
        return '/servers/%s/os-volume_attachments' % args.server


class AttachVolume(_AttachmentCommand):
    """Attach a volume to a server, read/write or read-only."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--mode', choices=['rw', 'ro'], default='rw',
                            help='Read/write (default) or read-only.')
        return parser

    def take_action(self, args):
        path = self.resolve(args)
        attached = client.of(self).post(path, {'volumeAttachment': {
            'volumeId': args.volume, 'attach_mode': args.mode}})
        attachment = attached['volumeAttachment']
        self.app.stdout.write('Attached %s to %s as %s (%s)\n' % (
            attachment['volumeId'], attachment['serverId'],
            attachment['device'], attachment['attach_mode']))


class DetachVolume(_AttachmentCommand):
    """Detach a volume from a server."""

    def take_action(self, args):
        client.of(self).delete('%s/%s' % (self.resolve(args), args.volume))


class SwapVolume(_AttachmentCommand):
    """Legacy swap: copy VOLUME into NEW_VOLUME and switch SERVER to it."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('new_volume', metavar='<new-volume>',
                            help='The volume it switches to, by name or '
                                 'id.')
        return parser

    def take_action(self, args):
        api, path = client.of(self), self.resolve(args)
        api.put('%s/%s' % (path, args.volume), {'volumeAttachment': {
            'volumeId': api.find('volume', args.new_volume)}})

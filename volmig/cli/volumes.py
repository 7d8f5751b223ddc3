"""``volmig volume ...``: volumes, attachments, swap and migrate."""

import sys
import time

from cliff import command
from cliff import lister
from cliff import show

from volmig.cli import app

COLUMNS = ('id', 'name', 'status', 'size_mb', 'multiattach', 'pool',
           'migration_status', 'attachments')
BAR_WIDTH = 30


def _row(volume: dict) -> tuple:
    attachments = ', '.join('%s (%s)' % (a['serverId'], a['attach_mode'])
                            for a in volume['attachments'])
    return (volume['id'], volume['displayName'], volume['status'],
            volume['size_mb'], volume['multiattach'], volume['pool'],
            volume['migration_status'], attachments)


class CreateVolume(show.ShowOne):
    """Create a volume."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--name', help="The volume's name.")
        size = parser.add_mutually_exclusive_group(required=True)
        size.add_argument('--size', type=int, help='Size in GiB.')
        size.add_argument('--size-mb', type=int, help='Size in MiB.')
        parser.add_argument('--multiattach', action='store_true',
                            help='Several servers may attach it.')
        parser.add_argument('--pool', help='Where it is made (a volume '
                                           'type with Cinder).')
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
        volume = self.app.api.post('/os-volumes', {'volume': request})
        return COLUMNS, _row(volume['volume'])


class ListVolumes(lister.Lister):
    """List volumes."""

    def take_action(self, args):
        found = self.app.api.get_all('/os-volumes', 'volumes')
        return COLUMNS, [_row(volume) for volume in found]


class ShowVolume(show.ShowOne):
    """Show a volume and its attachments."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('volume', help=app.VOLUME)
        return parser

    def take_action(self, args):
        return COLUMNS, _row(self.app.api.get('/os-volumes/%s' % (
            self.app.api.find('volume', args.volume)))['volume'])


class DeleteVolume(command.Command):
    """Delete a volume that has no attachments."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('volume', help=app.VOLUME)
        return parser

    def take_action(self, args):
        self.app.api.delete('/os-volumes/%s' % self.app.api.find(
            'volume', args.volume))


class _AttachmentCommand(command.Command):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', help=app.SERVER)
        parser.add_argument('volume', help=app.VOLUME)
        return parser

    def resolve(self, args):
        """Names become ids."""
        args.server = self.app.api.find('server', args.server)
        args.volume = self.app.api.find('volume', args.volume)

    @staticmethod
    def path(args) -> str:
        return '/servers/%s/os-volume_attachments' % args.server


class AttachVolume(_AttachmentCommand):
    """Attach a volume to a server, read/write or read-only."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--mode', choices=['rw', 'ro'], default='rw',
                            help='Read/write (default) or read-only.')
        return parser

    def take_action(self, args):
        self.resolve(args)
        attached = self.app.api.post(self.path(args), {'volumeAttachment': {
            'volumeId': args.volume, 'attach_mode': args.mode}})
        attachment = attached['volumeAttachment']
        self.app.stdout.write('Attached %s to %s as %s (%s)\n' % (
            attachment['volumeId'], attachment['serverId'],
            attachment['device'], attachment['attach_mode']))


class DetachVolume(_AttachmentCommand):
    """Detach a volume from a server."""

    def take_action(self, args):
        self.resolve(args)
        self.app.api.delete('%s/%s' % (self.path(args), args.volume))


class SwapVolume(_AttachmentCommand):
    """Legacy swap: copy VOLUME into NEW_VOLUME and switch SERVER to it."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('new_volume', help='The volume it switches to, '
                                               'by name or id.')
        return parser

    def take_action(self, args):
        self.resolve(args)
        args.new_volume = self.app.api.find('volume', args.new_volume)
        self.app.api.put('%s/%s' % (self.path(args), args.volume),
                         {'volumeAttachment': {'volumeId': args.new_volume}})


def progress_line(percent: float, elapsed: float) -> str:
    """``[#####    ]  50.0% ETA 12s``; the ETA is extrapolated."""
    filled = int(BAR_WIDTH * percent / 100)
    eta = ('%ds' % round(elapsed * (100 - percent) / percent)
           if 0 < percent < 100 else '-')
    return '[%s%s] %5.1f%% ETA %s' % ('#' * filled, ' ' * (BAR_WIDTH
                                                          - filled),
                                      percent, eta)


class MigrateVolume(lister.Lister):
    """Move a volume to another pool, live if it is attached."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('volume', help=app.VOLUME)
        parser.add_argument('--to', required=True, metavar='POOL',
                            help='The pool it moves to.')
        parser.add_argument('--max-bandwidth-mbps', type=int,
                            help='Bandwidth cap of the copy, MiB/s.')
        parser.add_argument('--wait', action='store_true',
                            help='Show progress until the copy is done.')
        parser.add_argument('--poll-interval', type=float, default=0.5,
                            help=app.POLL_INTERVAL)
        return parser

    def take_action(self, args):
        args.volume = self.app.api.find('volume', args.volume)
        request = {'pool': args.to}
        if args.max_bandwidth_mbps:
            request['max_bandwidth_mbps'] = args.max_bandwidth_mbps
        accepted = self.app.api.post('/os-volumes/%s/action' % args.volume,
                                     {'os-migrate_volume': request})
        if args.wait:
            self._wait(args)
        rows = [self._migration(migration_id)
                for migration_id in accepted['migration_ids']]
        return ('migration', 'server', 'mode', 'status'), rows

    def _migration(self, migration_id):
        migration = self.app.api.get('/os-volume-migrations/%s'
                                     % migration_id)['volume_migration']
        return (migration['id'], migration['instance_uuid'],
                migration['mode'], migration['status'])

    def _wait(self, args):
        began = time.monotonic()
        while True:
            volume = self.app.api.get('/os-volumes/%s'
                                      % args.volume)['volume']
            percent = volume.get('migration_progress') or 0.0
            sys.stderr.write('\r' + progress_line(
                percent, time.monotonic() - began))
            sys.stderr.flush()
            if volume['migration_status'] == 'success':
                sys.stderr.write('\nVolume %s is in pool %s.\n'
                                 % (volume['id'], volume['pool']))
                return
            if volume['migration_status'] == 'error':
                sys.stderr.write('\n')
                raise RuntimeError('migration of volume %s failed: %s' % (
                    volume['id'], volume.get('migration_error')))
            time.sleep(args.poll_interval)

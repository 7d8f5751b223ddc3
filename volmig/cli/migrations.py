"""``volume migration ...``: start a volume's migration, watch it, and
finish one by hand (``abort``, ``force complete``)."""

import time
from urllib import parse

from osc_lib.command import command

from volmig.cli import client
from volmig.cli import columns
from volmig.cli import options

# (REST key, column): the list's columns, then those --long adds.
COLUMNS = (('id', 'ID'), ('volume_id', 'Volume ID'),
           ('instance_uuid', 'Server ID'), ('host', 'Host'),
           ('mode', 'Mode'), ('status', 'Status'))
LONG_COLUMNS = (('bytes_done', 'Bytes Done'), ('bytes_total', 'Bytes Total'),
                ('eta_seconds', 'ETA Seconds'), ('created_at', 'Created At'),
                ('updated_at', 'Updated At'))
BAR_WIDTH = 30


def progress_line(percent: float, elapsed: float) -> str:
    """``[#####    ]  50.0% ETA 12s``; the ETA is extrapolated."""
    filled = int(BAR_WIDTH * percent / 100)
    eta = ('%ds' % round(elapsed * (100 - percent) / percent)
           if 0 < percent < 100 else '-')
    return '[%s%s] %5.1f%% ETA %s' % ('#' * filled, ' ' * (BAR_WIDTH
                                                          - filled),
                                      percent, eta)


class StartMigration(command.Lister):
    """Move a volume to another pool, live under its servers.

    Lists the migration of each server the volume is attached to."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('volume', metavar='<volume>', help=options.VOLUME)
        parser.add_argument('--to', required=True, metavar='<pool>',
                            help='The pool it moves to.')
        parser.add_argument('--max-bandwidth-mbps', type=int,
                            metavar='<mbps>',
                            help='Bandwidth cap of the copy, MiB/s.')
        options.add_wait(parser, 'Show progress until the move ends.', 0.5)
        return parser

    def take_action(self, args):
        api = client.of(self)
        volume_id = api.find('volume', args.volume)
        request = {'pool': args.to}
        if args.max_bandwidth_mbps:
            request['max_bandwidth_mbps'] = args.max_bandwidth_mbps
        accepted = api.post('/os-volumes/%s/action' % volume_id,
                            {'os-migrate_volume': request})
        if args.wait:
            self._wait(api, volume_id, args.poll_interval)
        return columns.table(COLUMNS[:1] + COLUMNS[2:], [
            api.get('/os-volume-migrations/%s' % migration_id)[
                'volume_migration']
            for migration_id in accepted['migration_ids']])

    def _wait(self, api, volume_id, poll_interval):
        began = time.monotonic()
        while True:
            volume = api.get('/os-volumes/%s' % volume_id)['volume']
            percent = volume.get('migration_progress') or 0.0
            self.app.stderr.write('\r' + progress_line(
                percent, time.monotonic() - began))
            self.app.stderr.flush()
            if volume['migration_status'] == 'success':
                self.app.stderr.write('\nVolume %s is in pool %s.\n'
                                 % (volume['id'], volume['pool']))
                return
            if volume['migration_status'] == 'error':
                self.app.stderr.write('\n')
                raise client.APIError('migration of volume %s failed: %s' % (
                    volume['id'], volume.get('migration_error')))
            time.sleep(poll_interval)


class ListMigrations(command.Lister):
    """List volume migrations, oldest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--status', metavar='<status>',
                            help='Only migrations in this status.')
        parser.add_argument('--volume', metavar='<volume>',
                            help='Only those of this volume, by name or id.')
        parser.add_argument('--server', metavar='<server>',
                            help='Only those of this server, by name or id.')
        parser.add_argument('--host', metavar='<host>',
                            help="Only those of this compute host's "
                                 "servers.")
        options.add_long(parser)
        return parser

    def take_action(self, args):
        api = client.of(self)
        filters = {'status': args.status, 'host': args.host,
                   'volume_id': args.volume and api.find('volume',
                                                         args.volume),
                   'instance_uuid': args.server and api.find('server',
                                                             args.server)}
        found = api.get_all('/os-volume-migrations?' + parse.urlencode(
            {key: value for key, value in filters.items() if value}),
            'volume_migrations')
        return columns.table(COLUMNS + (LONG_COLUMNS if args.long else ()),
                           found)


class _OneMigration(command.ShowOne):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('migration', metavar='<migration>',
                            help="The migration's id.")
        return parser


class ShowMigration(_OneMigration):
    """Show a volume migration: its phase, progress and pauses."""

    def take_action(self, args):
        return columns.fields(client.of(self).get(
            '/os-volume-migrations/%s' % args.migration)['volume_migration'])


class _MigrationAction(_OneMigration):
    """An operator's action on a migration; each refuses data loss."""

    verb = ''

    def take_action(self, args):
        migration = client.of(self).post(
            '/os-volume-migrations/%s/action' % args.migration,
            {self.verb: None})['volume_migration']
        return columns.fields(migration, ('id', 'status', 'host',
                                        'recovery_needed'))


class AbortMigration(_MigrationAction):
    """Send a migration's guest back to src, while src is whole.

    A started one is cancelled, as its block-storage service would."""

    verb = 'abort'


class ForceCompleteMigration(_MigrationAction):
    """Finish a migration past its switch to dst, or recover one.

    The agent finishes it, or recovers a failed one."""

    verb = 'force_complete'

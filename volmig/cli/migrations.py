"""``volmig migration ...``: what volume migrations are doing."""

from urllib import parse

from cliff import lister
from cliff import show

COLUMNS = ('id', 'volume_id', 'instance_uuid', 'host', 'mode', 'status',
           'bytes_done', 'bytes_total', 'eta_seconds')


class ListMigrations(lister.Lister):
    """List volume migrations."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        for name, text in (
                ('status', 'Only migrations in this status.'),
                ('volume-id', 'Only those of this volume.'),
                ('instance-uuid', 'Only those of this server.'),
                ('host', "Only those of this compute host's servers.")):
            parser.add_argument('--' + name, help=text)
        return parser

    def take_action(self, args):
        filters = {key: value for key, value in (
            ('status', args.status), ('volume_id', args.volume_id),
            ('instance_uuid', args.instance_uuid), ('host', args.host))
            if value}
        found = self.app.api.get_all('/os-volume-migrations?'
                                     + parse.urlencode(filters),
                                     'volume_migrations')
        return COLUMNS, [tuple(migration.get(column) for column in COLUMNS)
                         for migration in found]


class ShowMigration(show.ShowOne):
    """Show a volume migration, with its phase and pauses."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('migration', help="The migration's id.")
        return parser

    def take_action(self, args):
        migration = self.app.api.get('/os-volume-migrations/%s'
                                     % args.migration)['volume_migration']
        columns = tuple(sorted(migration))
        return columns, tuple(migration[column] for column in columns)


class _MigrationAction(show.ShowOne):
    """An admin action on a stuck migration."""

    verb = ''

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('migration', help="The migration's id.")
        return parser

    def take_action(self, args):
        migration = self.app.api.post(
            '/os-volume-migrations/%s/action' % args.migration,
            {self.verb: None})['volume_migration']
        columns = ('id', 'status', 'host', 'recovery_needed')
        return columns, tuple(migration[column] for column in columns)


class AbortMigration(_MigrationAction):
    """Send a migration's guest back to src, while src is still whole."""

    verb = 'abort'


class RecoverMigration(_MigrationAction):
    """Have the agent finish a migration past its switch, or recover one
    that failed (REST force_complete)."""

    verb = 'force_complete'

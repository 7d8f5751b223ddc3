"""``volume pool drain ...``: empty a pool of the block-storage service,
and watch it."""

import time
import urllib.parse

from osc_lib.command import command

from volmig.cli import client
from volmig.cli import columns
from volmig.cli import options

# (REST key, column) of each volume of a drain; a Cinder pool's drain
# says how it checked each move.
COLUMNS = (('volume_id', 'Volume ID'), ('name', 'Name'),
           ('size_mb', 'Size (MiB)'), ('action', 'Action'),
           ('state', 'State'), ('reason', 'Reason'), ('check', 'Check'))
MIB = 1024 * 1024


def path(pool: str, rest: str = '') -> str:
    """The pool's resource: a Cinder pool's name (``host@backend#pool``)
    has characters that a URL's path cannot carry as they are."""
    return '/os-volume-pools/%s%s' % (urllib.parse.quote(pool, safe=''),
                                      rest)


def summary_line(drain: dict) -> str:
    """``running: 3/5 volumes, 120/200 MiB, ETA 12s``."""
    progress = drain['progress']
    eta = progress['eta_seconds']
    return '%s: %d/%d volumes, %d/%d MiB, ETA %s' % (
        drain['status'], progress['volumes_done'],
        progress['volumes_total'], progress['bytes_done'] // MIB,
        progress['bytes_total'] // MIB,
        '%ds' % round(eta) if eta is not None else '-')


class _PoolCommand(command.Lister):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('pool', metavar='<pool>', help=options.POOL)
        return parser


    def show(self, pool):
        return client.of(self).get(path(pool))['drain']

    def wait(self, pool, poll_interval):
        """The drain once it ends, its progress on one line meanwhile."""
        while True:
            drain = self.show(pool)
            self.app.stderr.write('\r' + summary_line(drain))
            self.app.stderr.flush()
            if drain['status'] != 'running':
                self.app.stderr.write('\n')
                return drain
            time.sleep(poll_interval)


class StartDrain(_PoolCommand):
    """Move every volume out of a pool, attached or not.

    Lists what each volume takes, and why."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--to', required=True, metavar='<pool>',
                            help='The pool its volumes move to.')
        parser.add_argument('--max-parallel', type=int, default=1,
                            metavar='<count>',
                            help='Volumes moving at once (default 1).')
        parser.add_argument('--max-bandwidth-mbps', type=int,
                            metavar='<mbps>',
                            help='Bandwidth cap of each copy, MiB/s.')
        parser.add_argument('--dry-run', action='store_true',
                            help='Show the plan and its reasons; touch '
                                 'nothing.')
        options.add_wait(parser, 'Show the progress until the drain ends.',
                         1.0)
        return parser

    def take_action(self, args):
        request = {'to': args.to, 'max_parallel': args.max_parallel,
                   'dry_run': args.dry_run}
        if args.max_bandwidth_mbps:
            request['max_bandwidth_mbps'] = args.max_bandwidth_mbps
        drain = client.of(self).post(path(args.pool, '/action'),
                                     {'drain': request})['drain']
        if args.wait and not args.dry_run:
            drain = self.wait(args.pool, args.poll_interval)
        return columns.table(COLUMNS, drain['volumes'])


class ShowDrain(_PoolCommand):
    """Show a pool's latest drain: each volume's state, and progress."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        options.add_wait(parser, 'Show the progress until the drain ends.',
                         1.0)
        return parser

    def take_action(self, args):
        if args.wait:
            drain = self.wait(args.pool, args.poll_interval)
        else:
            drain = self.show(args.pool)
            self.app.stderr.write(summary_line(drain) + '\n')
        return columns.table(COLUMNS, drain['volumes'])


class ListDrains(_PoolCommand):
    """Every drain of a pool, newest first, with its progress."""

    def take_action(self, args):
        drains = client.of(self).get_all(
            path(args.pool, '/drains'), 'drains')
        return (('ID', 'Target Pool', 'Status', 'Created At', 'Progress'),
                [(drain['id'], drain['target_pool'], drain['status'],
                  drain['created_at'], summary_line(drain))
                 for drain in drains])


class CancelDrain(_PoolCommand):
    """Begin no more volumes of a pool's drain; those moving finish.

    Lists where each volume stands."""

    def take_action(self, args):
        drain = client.of(self).post(
            path(args.pool, '/action'), {'cancel_drain': None})['drain']
        self.app.stderr.write(summary_line(drain) + '\n')
        return columns.table(COLUMNS, drain['volumes'])

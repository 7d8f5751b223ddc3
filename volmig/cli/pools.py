"""``volmig volume drain ...``: empty a pool of the block-storage
service, and watch it."""

import sys
import time

from cliff import command
from cliff import lister

from volmig.cli import app

COLUMNS = ('volume', 'name', 'size_mb', 'action', 'state', 'reason')
MIB = 1024 * 1024


def summary_line(drain: dict) -> str:
    """``running: 3/5 volumes, 120/200 MiB, ETA 12s``."""
    progress = drain['progress']
    eta = progress['eta_seconds']
    return '%s: %d/%d volumes, %d/%d MiB, ETA %s' % (
        drain['status'], progress['volumes_done'],
        progress['volumes_total'], progress['bytes_done'] // MIB,
        progress['bytes_total'] // MIB,
        '%ds' % round(eta) if eta is not None else '-')


def _rows(drain: dict) -> list[tuple]:
    return [(entry['volume_id'], entry['name'], entry['size_mb'],
             entry['action'], entry['state'], entry['reason'])
            for entry in drain['volumes']]


class _DrainLister(lister.Lister):

    def show(self, pool):
        return self.app.api.get('/os-volume-pools/%s' % pool)['drain']

    def wait(self, pool, poll_interval):
        while True:
            drain = self.show(pool)
            sys.stderr.write('\r' + summary_line(drain))
            sys.stderr.flush()
            if drain['status'] != 'running':
                sys.stderr.write('\n')
                return drain
            time.sleep(poll_interval)


class DrainPool(_DrainLister):
    """Move every volume out of a pool, attached or not."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--from', dest='pool', required=True,
                            metavar='POOL', help='The pool to empty.')
        parser.add_argument('--to', required=True, metavar='POOL',
                            help='The pool its volumes move to.')
        parser.add_argument('--max-parallel', type=int, default=1,
                            help='Volumes moving at once (default 1).')
        parser.add_argument('--max-bandwidth-mbps', type=int,
                            help='Bandwidth cap of each copy, MiB/s.')
        parser.add_argument('--dry-run', action='store_true',
                            help='Print the plan and its reasons; touch '
                                 'nothing.')
        parser.add_argument('--wait', action='store_true',
                            help='Show the progress until the drain ends.')
        parser.add_argument('--poll-interval', type=float, default=1.0,
                            help=app.POLL_INTERVAL)
        return parser

    def take_action(self, args):
        request = {'to': args.to, 'max_parallel': args.max_parallel,
                   'dry_run': args.dry_run}
        if args.max_bandwidth_mbps:
            request['max_bandwidth_mbps'] = args.max_bandwidth_mbps
        drain = self.app.api.post('/os-volume-pools/%s/action' % args.pool,
                                  {'drain': request})['drain']
        if args.wait and not args.dry_run:
            drain = self.wait(args.pool, args.poll_interval)
        return COLUMNS, _rows(drain)


class ShowDrain(_DrainLister):
    """Show a pool's latest drain: each volume's state, and progress."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('pool', help="The pool's name.")
        parser.add_argument('--wait', action='store_true',
                            help='Show the progress until the drain ends.')
        parser.add_argument('--poll-interval', type=float, default=1.0,
                            help=app.POLL_INTERVAL)
        return parser

    def take_action(self, args):
        if args.wait:
            drain = self.wait(args.pool, args.poll_interval)
        else:
            drain = self.show(args.pool)
            sys.stderr.write(summary_line(drain) + '\n')
        return COLUMNS, _rows(drain)


class ListDrains(lister.Lister):
    """Every drain of a pool, newest first, with its progress."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('pool', help="The pool's name.")
        return parser

    def take_action(self, args):
        drains = self.app.api.get_all(
            '/os-volume-pools/%s/drains' % args.pool, 'drains')
        return (('id', 'target_pool', 'status', 'created_at', 'progress'),
                [(drain['id'], drain['target_pool'], drain['status'],
                  drain['created_at'], summary_line(drain))
                 for drain in drains])


class CancelDrain(command.Command):
    """Begin no more volumes of a pool's drain; those moving finish."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('pool', help="The pool's name.")
        return parser

    def take_action(self, args):
        drain = self.app.api.post('/os-volume-pools/%s/action' % args.pool,
                                  {'cancel_drain': None})['drain']
        self.app.stdout.write(summary_line(drain) + '\n')

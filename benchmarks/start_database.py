"""A start's database work alone, against a bare transaction.

The conductor's two steps of a start, ``begin`` and ``started``, called
in this process (no broker; the fake block-storage adapter on the same
database, whose reads of the volume count too), on a fresh SQLite file
and on a fresh PostgreSQL database (``--postgresql URL`` of a user that
may create databases; ``none`` skips it). The baseline of the same run
is a bare transaction on the same engine: one ``SELECT 1`` and its
commit.

It prints p50 of each, begin and started in bare transactions, and the
statements and the calls to the database each makes: a transaction's
BEGIN, its statements and its commit, and on a database server the
ping oslo.db sends on each pooled connection it takes.
``benchmarks/rpc_start.py`` measures the same start end to end, where
the broker's noise on two cores hides most of this.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from tests import fixtures as test_fixtures  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import states  # noqa: E402
from volmig.block_storage import fake  # noqa: E402
from volmig.compute import rpcapi as compute_rpcapi  # noqa: E402
from volmig.compute.drivers import base as driver_base  # noqa: E402
from volmig.conductor import migrations  # noqa: E402
from volmig.db import api as db  # noqa: E402
from volmig.db import instances as instances_db  # noqa: E402
from volmig.db import services as service_db  # noqa: E402

POSTGRESQL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'


class Counter:
    """What ``engine`` sends: its statements, and every call to the
    database with the pool's pings, the BEGINs and the commits."""

    def __init__(self, engine):
        self.statements = self.calls = 0
        sa.event.listen(engine, 'before_cursor_execute', self._statement)
        sa.event.listen(engine, 'begin', self._call)
        sa.event.listen(engine, 'commit', self._call)
        # SQLAlchemy has no event for a ping: count its calls.
        ping = engine.dialect.do_ping

        def counted_ping(dbapi_connection):
            self.calls += 1
            return ping(dbapi_connection)
        engine.dialect.do_ping = counted_ping

    def _statement(self, conn, cursor, statement, *args):
        # SQLite's BEGIN is sent as a statement (``volmig.db.sqlite``),
        # psycopg2's before the first: either is the begin's call.
        if not statement.startswith('BEGIN'):
            self.statements += 1
            self.calls += 1

    def _call(self, *args):
        self.calls += 1

    def take(self) -> tuple[int, int]:
        taken = (self.statements, self.calls)
        self.statements = self.calls = 0
        return taken


def one_server(ctxt) -> dict:
    """One running server on host h1 with one attached volume."""
    service_db.update(ctxt, compute_rpcapi.BINARY, 'h1',
                      compute_rpcapi.TOPIC, compute_rpcapi.RPC_API_VERSION,
                      {driver_base.LIVE_VOLUME_MIGRATION: True,
                       driver_base.MULTIATTACH: True})
    instance = instances_db.instance_create(ctxt, {
        'uuid': uuidutils.generate_uuid(), 'name': 'vm', 'host': 'h1',
        'project_id': 'p', 'user_id': 'u', 'vm_state': states.VM_ACTIVE,
        'power_state': states.POWER_RUNNING})
    volumes = fake.FakeVolumeAdapter()
    volume = volumes.create_volume(ctxt, 16)
    attachment = volumes.attachment_create(ctxt, volume['id'],
                                           instance['uuid'])
    volumes.attachment_complete(ctxt, attachment['id'])
    instances_db.bdm_create(ctxt, {
        'instance_uuid': instance['uuid'], 'volume_id': volume['id'],
        'attachment_id': attachment['id'], 'attach_mode': 'rw',
        'device_name': '/dev/vda'})
    return {'volumes': volumes, 'attachment_id': attachment['id']}


def measure(iterations: int) -> dict:
    ctxt = volmig_context.get_admin_context()
    server = one_server(ctxt)
    conductor = migrations.MigrationConductor(server['volumes'])
    counter = Counter(db.get_engine())

    def bare():
        with db.transaction(ctxt) as session:
            session.execute(sa.text('SELECT 1'))

    samples: dict = {'bare': [], 'begin': [], 'started': []}
    sent: dict = {}
    for n in range(iterations + 20):
        began = time.perf_counter()
        bare()
        bare_end = time.perf_counter()
        sent['bare'] = counter.take()
        begun = conductor.begin(ctxt, server['attachment_id'],
                                starting=True, owner='volmig-api:bench:1')
        begin_end = time.perf_counter()
        sent['begin'] = counter.take()
        conductor.started(ctxt, begun['migration']['id'], {'start': 1.0})
        started_end = time.perf_counter()
        sent['started'] = counter.take()
        # Not timed: the next start needs this one to have ended.
        conductor.fail(ctxt, begun['migration']['id'], 'benchmark',
                       recovery_needed=False)
        counter.take()
        if n >= 20:
            samples['bare'].append(bare_end - began)
            samples['begin'].append(begin_end - bare_end)
            samples['started'].append(started_end - begin_end)
    return {name: (statistics.median(values) * 1000, sent[name])
            for name, values in samples.items()}


def report(database: str, results: dict) -> None:
    bare_ms = results['bare'][0]
    for name, (ms, (statements, calls)) in results.items():
        print('%-11s %-8s %8.3f ms %6.1f bare  %2d statements  '
              '%2d calls' % (database, name, ms, ms / bare_ms,
                             statements, calls))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--iterations', type=int, default=300)
    parser.add_argument('--postgresql', default=POSTGRESQL,
                        help="a server's URL, or 'none'")
    args = parser.parse_args()
    # Each start is failed on purpose, and the conductor says so.
    logging.disable(logging.CRITICAL)
    print('p50 of %d; calls: statements, pings, BEGINs and commits'
          % args.iterations)
    servers = [('sqlite', None)]
    if args.postgresql != 'none':
        servers.append(('postgresql', args.postgresql))
    for database, url in servers:
        with fixtures.EnvironmentVariable(test_fixtures.DB_URL_VARIABLE,
                                          url):
            with test_fixtures.ConfFixture(), \
                    test_fixtures.DatabaseFixture():
                report(database, measure(args.iterations))


if __name__ == '__main__':
    main()

"""Prometheus metrics: what each process counts, and how it is served.

Agents count bytes copied, guest I/O pauses and job durations; every
service times the requests its RPC endpoints serve and counts the errors
they answer. Migrations by status come from the conductor at scrape time,
for the whole cloud, on the API's ``/metrics``.
"""

import prometheus_client
from prometheus_client import core
import sqlalchemy

from volmig import context as volmig_context

BYTES_COPIED = prometheus_client.Counter(
    'volmig_job_bytes_copied',
    'Bytes that agents\' jobs (commits, mirrors) have copied.')
PAUSES = prometheus_client.Histogram(
    'volmig_guest_io_pause_milliseconds',
    'Guest I/O pauses of the driver steps, in milliseconds.', ['step'],
    buckets=(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000))
JOB_SECONDS = prometheus_client.Histogram(
    'volmig_job_duration_seconds', 'How long agents\' jobs ran.', ['kind'],
    buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600))
# Served time, in the serving process: a caller's round trip adds the
# broker's hops and both ends' (de)serialization, which this leaves out,
# so that a slow answer shows which process spent the time.
RPC_SECONDS = prometheus_client.Histogram(
    'volmig_rpc_request_seconds', 'Requests served by RPC endpoints, by '
    'the seconds this process took to serve each.', ['method'],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30))
RPC_ERRORS = prometheus_client.Counter(
    'volmig_rpc_errors', 'Errors answered by RPC endpoints.',
    ['method', 'error'])
RPC_REFUSED = prometheus_client.Counter(
    'volmig_rpc_refused', 'Messages refused: unsigned, forged, stale, '
    'replayed, or a method or record their sender may not touch.',
    ['sender', 'reason'])
DB_STATEMENTS = prometheus_client.Counter(
    'volmig_db_statements', 'Statements sent to the database, transaction '
    'control (BEGIN, COMMIT) excluded.')
_CONTROL = ('BEGIN', 'COMMIT', 'ROLLBACK', 'SAVEPOINT', 'RELEASE')


def count_statements(engine) -> None:
    """Count what ``engine`` sends (each statement is a round trip to the
    database server): the cost of an operation in the database's terms."""
    @sqlalchemy.event.listens_for(engine, 'before_cursor_execute')
    def _count(connection, cursor, statement, parameters, context,
               executemany):
        if not statement.lstrip()[:9].upper().startswith(_CONTROL):
            DB_STATEMENTS.inc()


def observe_pauses(pauses: dict | None) -> None:
    for step, milliseconds in (pauses or {}).items():
        PAUSES.labels(step=step).observe(milliseconds)


class MigrationsByStatus:
    """``volmig_migrations{status}``, asked of the conductor per scrape."""

    def __init__(self, conductor):
        self.conductor = conductor

    def collect(self):
        family = core.GaugeMetricFamily(
            'volmig_migrations', 'Volume migrations by status.',
            labels=['status'])
        counts = self.conductor.migration_count_by_status(
            volmig_context.get_admin_context())
        for status, count in sorted(counts.items()):
            family.add_metric([status], count)
        yield family


def exposition(*registries) -> bytes:
    """This process's metrics, then those of ``registries``."""
    return b''.join(prometheus_client.generate_latest(registry)
                    for registry in (prometheus_client.REGISTRY,
                                     *registries))


def serve(listen: str, port: int) -> None:
    """A /metrics of this process's own, on a thread of its own."""
    prometheus_client.start_http_server(port, addr=listen)

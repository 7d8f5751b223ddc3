"""What a run leaves behind and what it costs: CPU, the broker's queues
and connections, and the rows of each table."""

import os
import subprocess
import time

import psutil
import sqlalchemy as sa


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy so far."""
    with open('/proc/stat') as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf('SC_CLK_TCK')


def cpu_seconds(*pids: int) -> float:
    """CPU seconds the processes have used so far, summed."""
    total = 0
    for pid in pids:
        with open('/proc/%d/stat' % pid) as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf('SC_CLK_TCK')


def cpu_by_name(*names: str) -> float:
    """CPU seconds that the processes of these names have used so far
    (the broker's ``beam.smp``, PostgreSQL's processes), summed, with
    what their children that ended had used: a PostgreSQL backend whose
    connection closed is gone, and its CPU is its server's now."""
    total = 0.0
    for process in psutil.process_iter(['name', 'cpu_times']):
        if process.info['name'] in names and process.info['cpu_times']:
            times = process.info['cpu_times']
            total += (times.user + times.system + times.children_user
                      + times.children_system)
    return total


def process_kinds(services, agents) -> dict:
    """What each kind of process has spent so far, in CPU seconds, by
    kind: where a migration's machine CPU goes."""
    def of(prefix: str):
        return [process.process.pid for name, process
                in services.processes.items() if name.startswith(prefix)]
    pools = [pool.process.pid for pool in agents]
    return {
        'conductors': lambda: cpu_seconds(*of('conductor')),
        'APIs': lambda: cpu_seconds(*of('api')),
        'agents': lambda: cpu_seconds(*pools),
        'the client': lambda: cpu_seconds(os.getpid()),
        'RabbitMQ': lambda: cpu_by_name('beam.smp'),
        'PostgreSQL': lambda: cpu_by_name('postgres'),
    }


def shares(by_kind: dict[str, float], busy: float, per: int) -> str:
    """Each kind's CPU, and the rest of the machine's, per ``per``, ms."""
    return ', '.join('%s %.0f' % (kind, 1000 * spent / per) for kind, spent
                     in dict(by_kind, **{'the rest': busy - sum(
                         by_kind.values())}).items())


def broker(vhost: str) -> dict[str, int]:
    """The vhost's queues and the broker's client connections to it."""
    def count(*args) -> int:
        return len(subprocess.run(
            ['rabbitmqctl', '-q', *args, '--no-table-headers'], check=True,
            capture_output=True, text=True, timeout=120).stdout.splitlines())
    connections = subprocess.run(
        ['rabbitmqctl', '-q', 'list_connections', 'vhost',
         '--no-table-headers'], check=True, capture_output=True, text=True,
        timeout=120).stdout.split()
    return {'queues': count('list_queues', '-p', vhost, 'name'),
            'connections': connections.count(vhost)}


def rows(engine) -> dict[str, int]:
    """Rows of each table of the database."""
    with engine.connect() as connection:
        return {table: connection.execute(sa.text(
                    'SELECT count(*) FROM %s' % table)).scalar()
                for table in sa.inspect(connection).get_table_names()}


# PostgreSQL's PGSTAT_IDLE_INTERVAL (10 s), and a second more.
STATS_FLUSH = 11


def database_work(engine) -> dict[str, int]:
    """What PostgreSQL counted for the database so far: its transactions
    (each statement in autocommit is one) and the sessions opened on it
    (each a new backend). Other databases count neither: empty.

    A backend reports its counts when it goes idle, at most once a
    second, and an idle one within ``STATS_FLUSH`` seconds: waited out
    first, so that the count holds what came before the call."""
    if engine.dialect.name != 'postgresql':
        return {}
    time.sleep(STATS_FLUSH)
    with engine.connect() as connection:
        row = connection.execute(sa.text(
            'SELECT xact_commit + xact_rollback, sessions FROM '
            'pg_stat_database WHERE datname = current_database()')).one()
    return {'PostgreSQL transactions': row[0],
            'PostgreSQL sessions': row[1]}


def left(vhost: str, engine) -> dict[str, int]:
    """Every count a run leaves grown: the broker's, the tables' rows and
    PostgreSQL's work."""
    return dict(broker(vhost), **rows(engine), **database_work(engine))


def growth(before: dict, after: dict, per: int) -> str:
    """What grew between two counts, per ``per`` (one per migration)."""
    return ', '.join('%s %+.2f' % (name, (after[name] - before.get(name, 0))
                                   / per)
                     for name in sorted(after)) or 'nothing'

"""What a run leaves behind and what it costs: CPU, the broker's queues
and connections, and the rows of each table."""

import os
import subprocess

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


def growth(before: dict, after: dict, per: int) -> str:
    """What grew between two counts, per ``per`` (one per migration)."""
    return ', '.join('%s %+.2f' % (name, (after[name] - before.get(name, 0))
                                   / per)
                     for name in sorted(after)) or 'nothing'

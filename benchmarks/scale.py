"""200 migrations over 20 agents, against bare oslo.messaging calls.

Separate volmig-conductor and volmig-api processes, and 20 compute agents
(fake driver) as RPC servers in a few processes, on RabbitMQ (a vhost of
their own) and PostgreSQL (a database of their own; SQLite with
``--db-url sqlite:///...``). Each migration runs start, complete and its
commit job (``--job-seconds`` of simulated copy, reported as the real
driver reports it), from ``--concurrency`` client threads, as a
block-storage service would drive it.

It prints migrations per second from the first start to the last
completed, against the same number of bare oslo.messaging calls per second
from as many threads in the same run (a goal of >= 0.25 once), the
conductor's CPU, and the progress reports the conductor received per
migration.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from benchmarks import rpc_start  # noqa: E402
from benchmarks import served  # noqa: E402
from tests import fixtures as test_fixtures  # noqa: E402
from tests.integration import base as integration_base  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import block_storage  # noqa: E402
from volmig import client  # noqa: E402
from volmig import config  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import rpc  # noqa: E402
from volmig import states  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402
from volmig.db import api as db_api  # noqa: E402
from volmig.db import schema as schema  # noqa: E402

POSTGRESQL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'
PROGRESS = 'migration_report_progress'


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy so far."""
    with open('/proc/stat') as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf('SC_CLK_TCK')


def cpu_seconds(pid: int) -> float:
    with open('/proc/%d/stat' % pid) as stat:
        fields = stat.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def wait_for_agents(hosts: list[str], timeout: float = 120) -> None:
    conductor = conductor_rpcapi.ConductorAPI(timeout=5)
    admin = volmig_context.get_admin_context()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            up = {s['host'] for s in conductor.service_get_all(
                admin, 'volmig-compute') if s['is_up']}
        except Exception:
            up = set()
        if set(hosts) <= up:
            return
        time.sleep(0.5)
    raise RuntimeError('agents did not register')


def start_agents(services, hosts, per_process, job_seconds, tmp):
    """Agent pools; returns them, with their metrics ports, once every
    agent's RPC server consumes."""
    pools, ports = [], []
    for first in range(0, len(hosts), per_process):
        group = hosts[first:first + per_process]
        ports.append(integration_base.free_port())
        config = cluster.write_config(
            os.path.join(tmp, 'agents-%s-%d.conf' % (job_seconds, first)),
            {('fake_driver', 'job_seconds'): job_seconds,
             ('metrics', 'port'): ports[-1]})
        pools.append((group, services.useFixture(cluster.ServiceProcess(
            'agent-pool', [services.config_file, config], tmp,
            'agents-%s-%d' % (job_seconds, first), command=[
                sys.executable, '-m', 'benchmarks.agent_pool', '--hosts',
                ','.join(group)]))))
    deadline = time.monotonic() + 120
    for group, pool in pools:
        while True:
            try:
                with open(pool.log_path) as log:
                    text = log.read()
            except FileNotFoundError:
                text = ''

            if all('volmig-compute on %s is ready' % host in text
                   for host in group):
                break
            if time.monotonic() > deadline:
                raise RuntimeError('agents %s did not start; the end of '
                                   'their log:\n%s' % (group, text[-3000:]))
            time.sleep(0.2)
    return [pool for _, pool in pools], ports


def servers(count: int, workers: int) -> list[dict]:
    """Servers with a volume each, spread over the agents."""
    admin = volmig_context.get_admin_context()
    conductor = conductor_rpcapi.ConductorAPI()
    volumes = block_storage.get_adapter()

    def one(_):
        src = volumes.create_volume(admin, 1024)
        [server] = conductor.build_instances(
            admin, 'scale', [{'volume_id': src['id'], 'boot_index': 0}], 1,
            None)
        while True:
            built = conductor.instance_get(admin, server['uuid'])
            if built['vm_state'] == states.VM_ACTIVE:
                return built
            time.sleep(0.1)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, range(count)))


def destinations(built: list[dict], workers: int) -> list[tuple[str, str]]:
    """(src attachment, dst attachment) of each server's next migration,
    made as the block-storage service makes them, before it starts."""
    admin = volmig_context.get_admin_context()
    conductor = conductor_rpcapi.ConductorAPI()
    volumes = block_storage.get_adapter()

    def one(server):
        bdm = conductor.instance_get(admin, server['uuid'])[
            'block_devices'][0]
        dst = volumes.create_volume(admin, 1024)
        attachment = volumes.attachment_create(admin, dst['id'],
                                               server['uuid'], 'rw')
        return bdm['attachment_id'], attachment['id']
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, built))


def migrate_all(pairs, workers: int) -> float:
    """Start and complete every migration; seconds until all completed.

    Completion is watched through the conductor's counts by status (one
    GROUP BY), so the watching does not weigh on what is measured.
    """
    ctxt = volmig_context.get_service_context()
    admin = volmig_context.get_admin_context()
    migrations = client.MigrationClient()
    conductor = conductor_rpcapi.ConductorAPI()
    before = conductor.migration_count_by_status(admin)

    def one(pair):
        src, dst = pair
        migrations.start(ctxt, src)
        migrations.complete(ctxt, src, dst, wait=False)
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, pairs))
    while True:
        counts = conductor.migration_count_by_status(admin)
        if counts.get(states.ERROR, 0) > before.get(states.ERROR, 0):
            raise RuntimeError('%d migrations failed' % (
                counts[states.ERROR] - before.get(states.ERROR, 0)))
        if (counts.get(states.COMPLETED, 0)
                - before.get(states.COMPLETED, 0)) >= len(pairs):
            return time.perf_counter() - began
        time.sleep(0.1)


def bare_rate(count: int, workers: int) -> float:
    ctxt = volmig_context.get_service_context()
    server = rpc.get_server('volmig-bench-echo', 'bench',
                            [rpc_start.Echo()])
    server.start()
    try:
        echo = rpc.get_client('volmig-bench-echo', '1.0').prepare(
            server='bench')
        echo.call(ctxt, 'echo', value='warm-up')
        began = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda _: echo.call(ctxt, 'echo', value='x'),
                          range(count)))
        return count / (time.perf_counter() - began)
    finally:
        server.stop()
        server.wait()


def bare_statements_busy(count: int, workers: int) -> float:
    """Machine CPU seconds for ``count`` statements that do nothing
    (``SELECT 1``), five to a transaction, from as many threads, on the
    migrations' database: less than any statement of a migration costs,
    as their transactions hold two to five."""
    ctxt = volmig_context.get_admin_context()

    def five(_):
        with db_api.transaction(ctxt) as session:
            for _ in range(5):
                session.execute(sa.text('SELECT 1'))

    busy_before = machine_busy_seconds()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(five, range(count // 5)))
    return machine_busy_seconds() - busy_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--migrations', type=int, default=200)
    parser.add_argument('--agents', type=int, default=20)
    parser.add_argument('--agents-per-process', type=int, default=5)
    parser.add_argument('--concurrency', type=int, default=20)
    parser.add_argument('--job-seconds', type=float, default=2.0)
    parser.add_argument('--db-url', default=POSTGRESQL,
                        help='a database server to make a database on, or '
                             'a sqlite:/// URL (default: %(default)s)')
    args = parser.parse_args()

    with fixtures.TempDir() as tmp, cluster.VhostFixture() as vhost:
        if args.db_url.startswith('sqlite'):
            db_url, drop = args.db_url, lambda: None
        else:
            db_url, drop = test_fixtures.create_database(args.db_url,
                                                         'volmig_scale')
        try:
            config.parse_args([], default_config_files=[],
                              setup_logging=False)
            CONF.set_override('transport_url', vhost.url)
            CONF.set_override('state_path', tmp.path)
            CONF.set_override('rpc_response_timeout', 120)
            db_api.configure(db_url)
            schema.upgrade()
            cluster.master_key(tmp.path)
            rpc.init()
            conductor_port, api_port = (integration_base.free_port(),
                                        integration_base.free_port())
            hosts = ['compute-%d' % n for n in range(1, args.agents + 1)]
            services = cluster.Cluster(
                tmp.path, vhost.url, db_url, [], options={
                    ('DEFAULT', 'report_interval'): 5,
                    ('DEFAULT', 'service_down_time'): 60,
                    ('DEFAULT', 'rpc_response_timeout'): 120,
                    ('compute', 'job_poll_interval'): 0.1},
                process_options={
                    'conductor': {('metrics', 'port'): conductor_port},
                    'api': {('metrics', 'port'): api_port}})
            with services:
                # Control plane alone: jobs end at once.
                agents, agent_ports = start_agents(
                    services, hosts, args.agents_per_process, 0, tmp.path)
                wait_for_agents(hosts)
                built = servers(args.migrations, args.concurrency)
                pairs = destinations(built, args.concurrency)
                # Ten times as many bare calls as migrations: long enough
                # for /proc/stat's ticks to measure their CPU.
                bare_calls = 10 * args.migrations
                busy_before = machine_busy_seconds()
                bare = bare_rate(bare_calls, args.concurrency)
                bare_busy = machine_busy_seconds() - busy_before
                bare_statements = 10 * bare_calls
                statement_busy = bare_statements_busy(bare_statements,
                                                      args.concurrency)
                conductor = services.processes['conductor'].process.pid
                ports = [conductor_port, api_port] + agent_ports
                served_before = served.requests_served(ports)
                sent_before = served.statements_sent(ports)
                cpu_before = cpu_seconds(conductor)
                busy_before = machine_busy_seconds()
                seconds = migrate_all(pairs, args.concurrency)
                cpu = cpu_seconds(conductor) - cpu_before
                busy = machine_busy_seconds() - busy_before
                requests = served.served_since(served_before, ports)
                sent = served.statements_sent(ports) - sent_before
                # Then each commit job copies for a while, as QEMU's do.
                for agent in agents:
                    agent.stop()
                start_agents(services, hosts, args.agents_per_process,
                             args.job_seconds, tmp.path)
                # The fake driver's guests died with their agents.
                pairs = destinations(servers(args.migrations,
                                             args.concurrency),
                                     args.concurrency)
                reports_before = served.requests_served([conductor_port])
                copying = migrate_all(pairs, args.concurrency)
                reports = served.served_since(
                    reports_before, [conductor_port]).get(PROGRESS, 0)
            rpc.cleanup()
        finally:
            drop()

    rate = args.migrations / seconds
    print('RabbitMQ 127.0.0.1, database %s; %d agents in %d processes, '
          '%d client threads, %.1f s simulated copy per job'
          % (db_url.split(':', 1)[0], args.agents,
             -(-args.agents // args.agents_per_process), args.concurrency,
             args.job_seconds))
    print('bare oslo.messaging calls: %8.1f /s' % bare)
    print('migrations start->completed: %6.2f /s (%d in %.1f s)'
          % (rate, args.migrations, seconds))
    print('migrations / bare calls: %.3f (target >= 0.25)' % (rate / bare))
    print('conductor CPU: %.1f s, %.0f%% of one core, %.0f ms per migration'
          % (cpu, 100 * cpu / seconds, 1000 * cpu / args.migrations))
    print('machine CPU: %.0f ms per migration, %.1f of %d cores busy'
          % (1000 * busy / args.migrations, busy / seconds,
             os.cpu_count() or 0))
    # The bare calls ran from as many threads, just before.
    bare_cpu = bare_busy / bare_calls
    print('machine CPU per bare call: %.1f ms; a migration costs %.1f bare '
          'calls of CPU (goal <= 12)'
          % (1000 * bare_cpu, busy / args.migrations / bare_cpu))
    statement_cpu = statement_busy / bare_statements
    print('database statements per migration: %.1f; machine CPU per bare '
          'statement (SELECT 1, five to a transaction): %.2f ms'
          % (sent / args.migrations, 1000 * statement_cpu))
    # Requests the services answered, heartbeats and periodic tasks
    # included; each is at least a round trip through the broker.
    per_migration = sum(requests.values()) / args.migrations
    print('RPC requests served per migration: %.1f (%s)' % (
        per_migration, ', '.join(
            '%s %.2f' % (method, count / args.migrations)
            for method, count in sorted(requests.items(),
                                        key=lambda item: -item[1]))))
    print('if a migration cost only its messages, each as much as a bare '
          'call: at most %.3f' % (1 / per_migration))
    # What this many requests and statements cost with no work in them:
    # below it, a migration needs fewer of them, not faster code.
    floor = per_migration + sent / args.migrations * statement_cpu / bare_cpu
    print('if each request cost a bare call and each statement a bare '
          'statement: %.1f bare calls of CPU per migration (goal <= 12)'
          % floor)
    print('with %.1f s commit jobs: %d migrations in %.1f s, %.1f progress '
          'reports per migration' % (args.job_seconds, args.migrations,
                                     copying, reports / args.migrations))


if __name__ == '__main__':
    main()

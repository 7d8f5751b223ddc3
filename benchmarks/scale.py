"""200 migrations over 20 agents, against bare oslo.messaging calls.

Separate volmig-conductor and volmig-api processes (``--conductors`` and
``--apis`` of each), and 20 compute agents (fake driver) as RPC servers
in agent pools of ``--agents-per-process``, on RabbitMQ (a vhost of
their own) and PostgreSQL (a database of their own; SQLite with
``--db-url sqlite:///...``). Each migration runs start, complete and its
commit job (``--job-seconds`` of simulated copy, reported as the real
driver reports it), from ``--concurrency`` client threads, as a
block-storage service would drive it.

It prints the heartbeats' load while nothing migrates (their requests,
the conductors' CPU and database statements per second), migrations per
second from the first start to the last completed, against the same
number of bare oslo.messaging calls per second from as many threads in
the same run, the conductors' CPU per migration (with and without the
heartbeats' share), what grew per migration (the vhost's queues, the
broker's connections, each table's rows, and on PostgreSQL its counts of
transactions and sessions), and the progress reports per migration.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402

from benchmarks import agent_pool  # noqa: E402
from benchmarks import baselines  # noqa: E402
from benchmarks import footprint  # noqa: E402
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
from volmig.conductor import operator_rpcapi  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402
from volmig.db import api as db_api  # noqa: E402
from volmig.db import schema as schema  # noqa: E402

POSTGRESQL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'
PROGRESS = 'migration_report_progress'


def servers(count: int, workers: int, timeout: float = 600) -> list[dict]:
    """Servers with a volume each, spread over the agents; each must be
    active within ``timeout`` seconds, or the run fails naming it."""
    admin = volmig_context.get_admin_context()
    conductor = conductor_rpcapi.ConductorAPI()
    volumes = block_storage.get_adapter()

    def one(_):
        src = volumes.create_volume(admin, 1024)
        [server] = conductor.build_instances(
            admin, 'scale', [{'volume_id': src['id'], 'boot_index': 0}], 1,
            None)
        deadline = time.monotonic() + timeout
        while True:
            built = conductor.instance_get(admin, server['uuid'])
            if built['vm_state'] == states.VM_ACTIVE:
                return built
            if time.monotonic() > deadline:
                raise RuntimeError('server %s on %s is %s after %d s' % (
                    built['uuid'], built['host'], built['vm_state'],
                    timeout))
            time.sleep(0.5)
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
    conductor = operator_rpcapi.OperatorAPI()
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


def spawn_more(services, binary: str, name: str, count: int,
               tmp: str) -> list[int]:
    """``count - 1`` more processes of ``binary``; their metrics ports."""
    ports = []
    for number in range(2, count + 1):
        ports.append(integration_base.free_port())
        options = {('DEFAULT', 'host'): '%s-%d' % (name, number),
                   ('metrics', 'port'): ports[-1]}
        if binary == 'volmig-api':
            options[('api', 'port')] = integration_base.free_port()
        services.spawn(binary, '%s-%d' % (name, number), cluster.write_config(
            os.path.join(tmp, '%s-%d.conf' % (name, number)), options))
    return ports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--migrations', type=int, default=200)
    parser.add_argument('--agents', type=int, default=20)
    parser.add_argument('--agents-per-process', type=int, default=5)
    parser.add_argument('--conductors', type=int, default=1)
    parser.add_argument('--apis', type=int, default=1)
    parser.add_argument('--concurrency', type=int, default=20)
    parser.add_argument('--job-seconds', type=float, default=2.0)
    parser.add_argument('--no-copying', action='store_true',
                        help='skip the second run, whose commit jobs copy '
                             'for --job-seconds')
    parser.add_argument('--report-interval', type=int, default=10,
                        help="each service's heartbeat, in seconds "
                             "(default: %(default)s, as Nova's)")
    parser.add_argument('--idle-seconds', type=float, default=30,
                        help='how long the heartbeats are measured alone')
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
                    ('DEFAULT', 'report_interval'): args.report_interval,
                    ('DEFAULT', 'service_down_time'):
                        6 * args.report_interval,
                    ('DEFAULT', 'rpc_response_timeout'): 120,
                    ('compute', 'job_poll_interval'): 0.1},
                process_options={
                    'conductor': {('metrics', 'port'): conductor_port},
                    'api': {('metrics', 'port'): api_port}})
            with services:
                conductor_ports = [conductor_port] + spawn_more(
                    services, 'volmig-conductor', 'conductor',
                    args.conductors, tmp.path)
                api_ports = [api_port] + spawn_more(
                    services, 'volmig-api', 'api', args.apis, tmp.path)
                # Control plane alone: jobs end at once.
                agents, agent_ports = agent_pool.start(
                    services, hosts, args.agents_per_process, 0, tmp.path)
                agent_pool.wait_until_up(hosts)
                conductors = [process.process.pid for name, process in
                              services.processes.items()
                              if name.startswith('conductor')]
                ports = conductor_ports + api_ports + agent_ports
                served.wait_until_served(ports)
                idle = served.heartbeats(conductors, conductor_ports,
                                         args.idle_seconds)
                built = servers(args.migrations, args.concurrency)
                pairs = destinations(built, args.concurrency)
                # Ten times as many bare calls as migrations, up to 2,000:
                # long enough for /proc/stat's ticks to measure them.
                calls = min(10 * args.migrations, 2000)
                # Before the migrations and after (outside the counts of
                # what grew), averaged: the speed drifted 15% here.
                bare = [baselines.bare_calls(calls, args.concurrency)]
                bare_statements = 10 * calls
                statement_busy = baselines.bare_statements_busy(
                    bare_statements, args.concurrency)
                engine = db_api.get_engine()
                left_before = footprint.left(vhost.name, engine)
                served_before = served.requests_served(ports)
                # Each kind's servers: what its ports count, and how many.
                servers_of = [(conductor_ports, args.conductors),
                              (api_ports, args.apis),
                              (agent_ports, args.agents)]
                served_by = [served.requests_served(of)
                             for of, _ in servers_of]
                sent_before = served.statements_sent(ports)
                kinds = footprint.process_kinds(services, agents)
                kinds_before = {kind: cost() for kind, cost in kinds.items()}
                cpu_before = footprint.cpu_seconds(*conductors)
                busy_before = footprint.machine_busy_seconds()
                seconds = migrate_all(pairs, args.concurrency)
                cpu = footprint.cpu_seconds(*conductors) - cpu_before
                by_kind = {kind: cost() - kinds_before[kind]
                           for kind, cost in kinds.items()}
                busy = footprint.machine_busy_seconds() - busy_before
                requests = served.served_since(served_before, ports)
                sent = served.statements_sent(ports) - sent_before
                left = footprint.left(vhost.name, engine)
                bare.append(baselines.bare_calls(calls, args.concurrency))
                # And as far apart as the migrations' requests were: an
                # echo server for each of their servers, at its rate.
                rates = [sum(served.served_since(before, of).values())
                         / seconds / count
                         for (of, count), before in zip(
                             servers_of, served_by, strict=True)
                         for _ in range(count)]
                paced = baselines.bare_calls(calls, args.concurrency, rates)
                reports = copying = 0
                # Then each commit job copies for a while, as QEMU's do.
                for agent in agents if not args.no_copying else ():
                    agent.stop()
                if not args.no_copying:
                    agent_pool.start(services, hosts, args.agents_per_process,
                                 args.job_seconds, tmp.path)
                    # The fake driver's guests died with their agents.
                    pairs = destinations(servers(args.migrations,
                                                 args.concurrency),
                                         args.concurrency)
                    reports_before = served.requests_served(conductor_ports)
                    copying = migrate_all(pairs, args.concurrency)
                    reports = served.served_since(
                        reports_before, conductor_ports).get(PROGRESS, 0)
            rpc.cleanup()
        finally:
            drop()

    rate = args.migrations / seconds
    print('RabbitMQ 127.0.0.1, database %s; %d agents in %d processes, '
          '%d conductors, %d APIs, %d client threads, heartbeats every '
          '%d s, %.1f s simulated copy per job'
          % (db_url.split(':', 1)[0], args.agents,
             -(-args.agents // args.agents_per_process), args.conductors,
             args.apis, args.concurrency, args.report_interval,
             args.job_seconds))
    print('heartbeats while nothing migrates: %.1f service_update/s of '
          '%.1f requests/s; conductors: %.0f ms CPU/s, %.1f database '
          'statements/s' % (idle['updates'], idle['requests'],
                            1000 * idle['cpu'], idle['statements']))
    # From as many threads, right before the migrations and right after.
    bare_rate = sum(rate for rate, _ in bare) / len(bare)
    bare_cpu = sum(cpu for _, cpu in bare) / len(bare) / calls
    print('bare oslo.messaging calls: %8.1f /s (%s before and after)'
          % (bare_rate, ', '.join('%.1f' % run[0] for run in bare)))
    print('migrations start->completed: %6.2f /s (%d in %.1f s)'
          % (rate, args.migrations, seconds))
    print('migrations / bare calls: %.3f (target >= 0.25)'
          % (rate / bare_rate))
    print('conductor CPU: %.1f s, %.0f%% of one core, %.0f ms per migration'
          ' (%.0f ms less the heartbeats at their idle rate)'
          % (cpu, 100 * cpu / seconds, 1000 * cpu / args.migrations,
             1000 * (cpu - idle['cpu'] * seconds) / args.migrations))
    print('grew per migration: %s'
          % footprint.growth(left_before, left, args.migrations))
    print('machine CPU: %.0f ms per migration, %.1f of %d cores busy'
          % (1000 * busy / args.migrations, busy / seconds,
             os.cpu_count() or 0))
    print('  of which, ms per migration: %s'
          % footprint.shares(by_kind, busy, args.migrations))
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
    statements = sent / args.migrations * statement_cpu / bare_cpu
    floor = per_migration + statements
    print('if each request cost a bare call and each statement a bare '
          'statement: %.1f bare calls of CPU per migration (goal <= 12); '
          'a migration costs %.2f times it'
          % (floor, busy / args.migrations / bare_cpu / floor))
    # Below this no service on oslo.messaging goes: the same requests,
    # as far apart as the migrations sent them.
    paced_cpu = paced[1] / calls
    paced_floor = per_migration * paced_cpu / bare_cpu + statements
    print('bare calls as far apart as the migrations\' requests (%d echo '
          'servers, each at the rate of one of theirs: %s /s): %.1f ms of '
          'machine CPU each, %.2f times one back to back'
          % (len(rates), ', '.join(sorted({'%.1f' % rate for rate in rates},
                                          key=float, reverse=True)),
             1000 * paced_cpu, paced_cpu / bare_cpu))
    print('if each request cost a bare call so paced and each statement a '
          'bare statement: %.1f bare calls of CPU per migration; a '
          'migration costs %.2f times it (goal <= 1.5)'
          % (paced_floor, busy / args.migrations / bare_cpu / paced_floor))
    if not args.no_copying:
        print('with %.1f s commit jobs: %d migrations in %.1f s, %.1f '
              'progress reports per migration'
              % (args.job_seconds, args.migrations, copying,
                 reports / args.migrations))


if __name__ == '__main__':
    main()

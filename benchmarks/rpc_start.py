"""The block-storage start round trip against a bare oslo.messaging call.

Both run in this process against the same RabbitMQ (a vhost of their own),
side by side:

* bare: an oslo.messaging call to an echo endpoint served in this process,
  and the same call through volmig.rpc, signed and checked;
* volmig: ``MigrationClient.start`` and ``cancel`` through separate
  volmig-api, volmig-conductor and volmig-compute (fake driver) processes.

* the same shape bare: the client calls a relay process, which makes
  three calls to an echo process in turn, as volmig-api calls the
  conductor, the agent and the conductor again. Both are plain
  oslo.messaging servers with an endpoint that does nothing.

It prints p50 and p99 of each, and the ratio of start to the bare call.
With ``--backend file`` block storage is volmig-volume, as in the embedded
default, and it prints the requests volmig-volume served per start and
cancel: none, since the conductor reads volumes in the database.
A start is four round trips (client to API, API to conductor's begin, API
to agent, API to conductor's started); the bare four-hop chain is what
that shape costs with no work in it. Then where a start's time goes: the
mean time each process took to serve its part (from its own /metrics),
and what is left for the hops and volmig-api's own work.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import functools  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402
import oslo_messaging as messaging  # noqa: E402

from benchmarks import served  # noqa: E402
from tests.integration import base  # noqa: E402
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
from volmig.db import schema  # noqa: E402


class Echo:
    target = messaging.Target(version='1.0')

    def echo(self, ctxt, value):
        return value


class Relay:
    """Calls the echo process ``hops`` times, one after the other."""
    target = messaging.Target(version='1.0')

    def __init__(self):
        self.echo = rpc.get_client('volmig-bench-echo', '1.0').prepare(
            server='echo')

    def relay(self, ctxt, hops):
        for _ in range(hops):
            self.echo.call(ctxt, 'echo', value='x')
        return hops


def serve(kind: str, url: str, key_file: str, db_url: str) -> None:
    """An echo or relay server in a process of its own, until SIGTERM. It
    keeps the nonces of what it takes in the database, as the
    controllers do."""
    config.parse_args([], default_config_files=[], setup_logging=False)
    CONF.set_override('transport_url', url)
    CONF.set_override('key_file', key_file, group='signing')
    db_api.configure(db_url)
    rpc.init()
    endpoint = Echo() if kind == 'echo' else Relay()
    server = rpc.get_server('volmig-bench-%s' % kind, kind, [endpoint])
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print('serving', flush=True)
    stop.wait()
    server.stop()
    server.wait()


def chain_calls(ctxt, url: str, db_url: str,
                iterations: int) -> list[float]:
    """Client, relay and echo in three processes: volmig's start shape."""
    processes = [subprocess.Popen(
        [sys.executable, '-m', 'benchmarks.rpc_start', '--serve', kind,
         '--url', url, '--key-file', CONF.signing.key_file,
         '--db-url', db_url],
        stdout=subprocess.PIPE, text=True)
        for kind in ('echo', 'relay')]
    try:
        for process in processes:
            process.stdout.readline()
        relay = rpc.get_client('volmig-bench-relay', '1.0',
                               timeout=60).prepare(server='relay')
        for _ in range(10):
            relay.call(ctxt, 'relay', hops=3)
        return [timed(lambda: relay.call(ctxt, 'relay', hops=3))
                for _ in range(iterations)]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return statistics.median(ms), p99


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def bare_calls(ctxt, iterations: int, signed: bool = False) -> list[float]:
    """Calls to an echo endpoint in this process: plain oslo.messaging,
    or ``signed`` through volmig.rpc (each message signed and checked)."""
    if signed:
        server = rpc.get_server('volmig-bench-echo', 'bench', [Echo()])
        client = rpc.get_client('volmig-bench-echo', '1.0')
    else:
        transport = messaging.get_rpc_transport(CONF)
        serializer = rpc.RequestContextSerializer()
        server = messaging.get_rpc_server(
            transport, messaging.Target(topic='volmig-bench-plain',
                                        server='bench'), [Echo()],
            serializer=serializer)
        client = messaging.get_rpc_client(
            transport, messaging.Target(topic='volmig-bench-plain',
                                        version='1.0'),
            serializer=serializer)
    server.start()
    try:
        echo = client.prepare(server='bench')
        for _ in range(10):
            echo.call(ctxt, 'echo', value='warm-up')
        return [timed(lambda: echo.call(ctxt, 'echo', value='x'))
                for _ in range(iterations)]
    finally:
        server.stop()
        server.wait()
        if not signed:
            transport.cleanup()


def volmig_round_trips(iterations: int, storage_port: int | None = None):
    """Starts and cancels; with ``storage_port`` (volmig-volume's metrics)
    also the requests volmig-volume served per iteration, by method."""
    admin = volmig_context.get_admin_context()
    ctxt = volmig_context.get_service_context()
    conductor = conductor_rpcapi.ConductorAPI()
    migrations = client.MigrationClient(poll_interval=0.01)
    src = block_storage.get_adapter().create_volume(admin, 16)
    [server] = conductor.build_instances(
        admin, 'bench', [{'volume_id': src['id']}], 1, None)
    while conductor.instance_get(admin, server['uuid'])['vm_state'] \
            != states.VM_ACTIVE:
        time.sleep(0.05)
    attachment = conductor.instance_get(
        admin, server['uuid'])['block_devices'][0]['attachment_id']
    starts, cancels, reads, api_reads = [], [], [], []
    storage = [storage_port] if storage_port else []
    before = served.requests_served(storage) if storage else {}
    for _ in range(iterations):
        began = time.perf_counter()
        migration = migrations.start(ctxt, attachment)
        starts.append(time.perf_counter() - began)
        # One hop with one database read, and two hops with the same read:
        # what a hop costs beyond a bare call.
        reads.append(timed(functools.partial(
            conductor.migration_get, admin, migration['id'])))
        api_reads.append(timed(functools.partial(
            migrations.get, ctxt, migration['id'])))
        cancels.append(timed(lambda: migrations.cancel(ctxt, attachment)))
        # Not timed: the next start needs this one to have ended.
        migrations.wait_for(ctxt, migration['id'], states.CANCELLED)
    nested = ({method: count / iterations for method, count in
               served.served_since(before, storage).items()}
              if storage else None)
    return starts, cancels, reads, api_reads, nested


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--iterations', type=int, default=200)
    parser.add_argument('--db-url', help='database of the conductor '
                        '(default: SQLite in a temporary directory)')
    parser.add_argument('--backend', choices=('fake', 'file'),
                        default='fake',
                        help='block storage: volume records only (fake), or '
                        'volmig-volume with its pools, as the embedded '
                        'default runs (file)')
    parser.add_argument('--serve', choices=('echo', 'relay'),
                        help=argparse.SUPPRESS)
    parser.add_argument('--url', help=argparse.SUPPRESS)
    parser.add_argument('--key-file', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.url, args.key_file, args.db_url)

    with fixtures.TempDir() as tmp, cluster.VhostFixture() as vhost:
        db_url = args.db_url or 'sqlite:///%s/volmig.sqlite' % tmp.path
        config.parse_args([], default_config_files=[], setup_logging=False)
        CONF.set_override('transport_url', vhost.url)
        CONF.set_override('state_path', tmp.path)
        CONF.set_override('backend', args.backend, group='volume')
        db_api.configure(db_url)
        schema.upgrade()
        cluster.master_key(tmp.path)
        rpc.init()
        file_backend = args.backend == 'file'
        names = ['api', 'conductor', 'compute-1'] + (
            ['volume'] if file_backend else [])
        ports = {name: base.free_port() for name in names}
        options = {('DEFAULT', 'report_interval'): 2,
                   ('volume', 'backend'): args.backend}
        if file_backend:
            options[('storage', 'pools')] = 'pool-a:%s' % tmp.join('pool-a')
        services = cluster.Cluster(
            tmp.path, vhost.url, db_url, ['compute-1'], options=options,
            process_options={name: {('metrics', 'port'): port}
                             for name, port in ports.items()},
            volume=file_backend)
        with services:
            services.wait_until_registered()
            ctxt = volmig_context.get_service_context()
            bare = bare_calls(ctxt, args.iterations)
            signed = bare_calls(ctxt, args.iterations, signed=True)
            chain = chain_calls(ctxt, vhost.url, db_url, args.iterations)
            starts, cancels, reads, api_reads, nested = volmig_round_trips(
                args.iterations, ports.get('volume'))
            # volmig-volume's requests are counted above, not timed.
            parts = {name: served.mean_ms([ports[name]])
                     for name in ('api', 'conductor', 'compute-1')}
        rpc.cleanup()

    database = db_url.split(':', 1)[0]
    print('RabbitMQ 127.0.0.1, %d iterations, conductor database %s, '
          'block storage %s' % (args.iterations, database, args.backend))
    print('%-34s %9s %9s' % ('', 'p50 ms', 'p99 ms'))
    rows = [('bare oslo.messaging call', bare),
            ('the same call signed (volmig.rpc)', signed),
            ('bare 4-hop chain, 3 processes', chain),
            ('volmig start (call)', starts),
            ('volmig cancel (accepted)', cancels),
            ('conductor migration_get (1 hop)', reads),
            ('client get (API + conductor)', api_reads),
            ('volmig start + cancel',
             [s + c for s, c in zip(starts, cancels, strict=True)])]
    for label, samples in rows:
        print('%-34s %9.2f %9.2f' % ((label,) + percentiles(samples)))
    bare_p50, _ = percentiles(bare)
    start_p50, _ = percentiles(starts)
    chain_p50, _ = percentiles(chain)
    print('signing and checking, per call (p50): %.2f ms'
          % (percentiles(signed)[0] - bare_p50))
    print('bare 4-hop chain p50 / bare call p50: %.1fx (the shape alone)'
          % (chain_p50 / bare_p50))
    print('start p50 / bare call p50: %.1fx (goal <= 5x)'
          % (start_p50 / bare_p50))
    if nested is not None:
        # The start is volmig-volume's own call when it moves a volume: a
        # call back into it from inside the start would nest.
        print('volmig-volume requests per start and cancel: %.2f %s'
              % (sum(nested.values()), nested or ''))
    breakdown(statistics.mean(starts) * 1000, bare_p50, chain_p50, parts)


def breakdown(start_ms: float, bare_ms: float, chain_ms: float,
              parts: dict) -> None:
    """Where a start's time goes, by the means each process served."""
    leaves = [('volmig-conductor migration_begin',
               parts['conductor']['migration_begin']),
              ('volmig-compute migration_start',
               parts['compute-1']['migration_start']),
              ('volmig-conductor migration_started',
               parts['conductor']['migration_started'])]
    print("where a start's time goes (means, ms):")
    print('  %-40s %8.2f' % ('start, as the client waited', start_ms))
    print('  %-40s %8.2f' % ('served by volmig-api migration_start',
                             parts['api']['migration_start']))
    for label, ms in leaves:
        print('    %-38s %8.2f' % (label, ms))
    rest = start_ms - sum(ms for _, ms in leaves)
    print('  %-40s %8.2f = %.1f bare calls (the bare 4-hop chain: %.1f)'
          % ('the 4 hops and volmig-api\'s own work', rest, rest / bare_ms,
             chain_ms / bare_ms))


if __name__ == '__main__':
    main()

"""Several compute agents (fake driver) in one process, for scale runs.

    python -m benchmarks.agent_pool --config-file F --hosts a,b,c

Each host is a full volmig-compute Service: its own RPC server, heartbeat
and job runner. Only the process is shared. ``start`` runs pools of them
for a benchmark.
"""

from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from oslo_config import cfg  # noqa: E402

from tests.integration import base as integration_base  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import config  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import service  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402


def wait_until_up(hosts: list[str], timeout: float = 120) -> None:
    """Until the conductor has every host's agent up."""
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


def start(services, hosts, per_process, job_seconds, tmp):
    """Agent pools; returns them, with their metrics ports, once every
    agent's RPC server consumes."""
    pools, ports = [], []
    for first in range(0, len(hosts), per_process):
        group = hosts[first:first + per_process]
        ports.append(integration_base.free_port())
        options = cluster.write_config(
            os.path.join(tmp, 'agents-%s-%d.conf' % (job_seconds, first)),
            {('fake_driver', 'job_seconds'): job_seconds,
             ('metrics', 'port'): ports[-1],
             # futurist starts a thread for every request until the pool
             # is full: a real host's 64 are 6,400 threads in a pool of
             # 100 agents, which stalled 2,000 migrations on 2 cores.
             # A simulated host needs a few.
             ('DEFAULT', 'executor_thread_pool_size'): 4})
        pools.append((group, services.useFixture(cluster.ServiceProcess(
            'agent-pool', [services.config_file, options], tmp,
            'agents-%s-%d' % (job_seconds, first), command=[
                sys.executable, '-m', 'benchmarks.agent_pool', '--hosts',
                ','.join(group)]))))
    # Measured: 1,000 agents in ten pools took about 3 minutes to start
    # on 2 cores.
    deadline = time.monotonic() + 120 + len(hosts)
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


def main() -> None:
    CONF.register_cli_opt(cfg.ListOpt('hosts', required=True,
                                      help='Compute host names to serve.'))
    config.parse_args(sys.argv[1:])
    service.serve(lambda: service.ServiceGroup([
        service.Service(service.COMPUTE, host=host) for host in CONF.hosts]))


if __name__ == '__main__':
    main()

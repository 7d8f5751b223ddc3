"""Several compute agents (fake driver) in one process, for scale runs.

    python -m benchmarks.agent_pool --config-file F --hosts a,b,c

Each host is a full volmig-compute Service: its own RPC server, heartbeat
and job runner. Only the process is shared.
"""

from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import sys  # noqa: E402

from oslo_config import cfg  # noqa: E402

from volmig import config  # noqa: E402
from volmig import service  # noqa: E402
from volmig.conf import CONF  # noqa: E402


def main() -> None:
    CONF.register_cli_opt(cfg.ListOpt('hosts', required=True,
                                      help='Compute host names to serve.'))
    config.parse_args(sys.argv[1:])
    service.serve(lambda: service.ServiceGroup([
        service.Service(service.COMPUTE, host=host) for host in CONF.hosts]))


if __name__ == '__main__':
    main()

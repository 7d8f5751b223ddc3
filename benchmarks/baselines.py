"""Baselines a scale run measures volmig against, in the same run: bare
oslo.messaging calls and bare database statements."""

import concurrent.futures
import time

import sqlalchemy as sa

from benchmarks import footprint
from benchmarks import rpc_start
from volmig import context as volmig_context
from volmig import rpc
from volmig.db import api as db_api


def bare_calls(count: int, workers: int) -> tuple[float, float]:
    """Bare oslo.messaging calls a second, from ``workers`` threads, and
    the machine CPU seconds that ``count`` of them took."""
    ctxt = volmig_context.get_service_context()
    server = rpc.get_server('volmig-bench-echo', 'bench',
                            [rpc_start.Echo()])
    server.start()
    try:
        echo = rpc.get_client('volmig-bench-echo', '1.0').prepare(
            server='bench')
        echo.call(ctxt, 'echo', value='warm-up')
        began = time.perf_counter()
        busy_before = footprint.machine_busy_seconds()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda _: echo.call(ctxt, 'echo', value='x'),
                          range(count)))
        return (count / (time.perf_counter() - began),
                footprint.machine_busy_seconds() - busy_before)
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

    busy_before = footprint.machine_busy_seconds()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(five, range(count // 5)))
    return footprint.machine_busy_seconds() - busy_before

"""Baselines a scale run measures volmig against, in the same run: bare
oslo.messaging calls and bare database statements."""

import concurrent.futures
import math
import time

import sqlalchemy as sa

from benchmarks import footprint
from benchmarks import rpc_start
from volmig import context as volmig_context
from volmig import rpc
from volmig.db import api as db_api


def bare_calls(count: int, workers: int,
               rates: list[float] | None = None) -> tuple[float, float]:
    """Bare oslo.messaging calls a second, from ``workers`` threads, and
    the machine CPU seconds that ``count`` of them took: back to back to
    one echo server, or to one echo server per rate in ``rates``, the
    n-th call to each ``n / rate`` seconds after the first.

    Paced, a call costs more: after each message it receives, an
    oslo.messaging listener polls again after 1 ms, 2, 4 and so on up to
    5 s (``amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN``, so that the acks
    its worker threads queue go out at once); back to back, those polls
    find the next message waiting.
    """
    ctxt = volmig_context.get_service_context()
    # (seconds after the first call, server) of each call, in order.
    if rates:
        share = count / sum(rates)
        calls = sorted((number / rate, server)
                       for server, rate in enumerate(rates)
                       for number in range(math.ceil(rate * share)))[:count]
    else:
        calls = [(0.0, 0)] * count
    echoes = [rpc.get_server('volmig-bench-echo', 'bench-%d' % server,
                             [rpc_start.Echo()])
              for server in range(len(rates or [0]))]
    for server in echoes:
        server.start()
    try:
        clients = [rpc.get_client('volmig-bench-echo', '1.0').prepare(
            server='bench-%d' % server) for server in range(len(echoes))]
        for echo in clients:
            echo.call(ctxt, 'echo', value='warm-up')
        began = time.perf_counter()
        busy_before = footprint.machine_busy_seconds()

        def one(call):
            after, server = call
            time.sleep(max(0.0, began + after - time.perf_counter()))
            clients[server].call(ctxt, 'echo', value='x')
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, calls))
        return (count / (time.perf_counter() - began),
                footprint.machine_busy_seconds() - busy_before)
    finally:
        for server in echoes:
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

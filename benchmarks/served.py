"""What volmig's processes have served, read from their own /metrics."""

import time

from prometheus_client import parser
import requests

from benchmarks import footprint
from benchmarks import polling


def _serves(port: int) -> bool:
    try:
        requests.get('http://127.0.0.1:%d/metrics' % port, timeout=5)
    except requests.ConnectionError:
        return False
    return True


def wait_until_served(ports: list[int], timeout: float = 120) -> None:
    """Until each process on ``ports`` serves its /metrics: one spawned
    without being waited for (a second API, on a busy machine) may still
    be starting."""
    for port in ports:
        polling.until(lambda port=port: _serves(port), bool,
                      'a process to serve /metrics on port %d' % port,
                      timeout, interval=0.2)


def _samples(ports: list[int], name: str):
    """Each sample of metric ``name`` that the processes on ``ports``
    expose now."""
    for port in ports:
        text = requests.get('http://127.0.0.1:%d/metrics' % port,
                            timeout=30).text
        for family in parser.text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    yield sample


def _by_method(ports: list[int], name: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for sample in _samples(ports, name):
        method = sample.labels['method']
        totals[method] = totals.get(method, 0) + sample.value
    return totals


def requests_served(ports: list[int]) -> dict[str, float]:
    """RPC requests served so far by method, summed over the processes
    whose metrics are on ``ports``."""
    return _by_method(ports, 'volmig_rpc_request_seconds_count')


def mean_ms(ports: list[int]) -> dict[str, float]:
    """By method, the mean time the processes on ``ports`` took to serve
    one request, in milliseconds (in the serving process: no hops)."""
    seconds = _by_method(ports, 'volmig_rpc_request_seconds_sum')
    return {method: seconds[method] * 1000 / count
            for method, count in requests_served(ports).items() if count}


def served_since(before: dict, ports: list[int]) -> dict[str, float]:
    after = requests_served(ports)
    return {method: count - before.get(method, 0)
            for method, count in after.items()
            if count > before.get(method, 0)}


def statements_sent(ports: list[int]) -> float:
    """Database statements sent so far by the processes on ``ports``."""
    return sum(sample.value for sample in
               _samples(ports, 'volmig_db_statements_total'))


def heartbeats(conductors: list[int], ports: list[int],
               seconds: float) -> dict:
    """What the heartbeats cost while nothing migrates, per second: the
    requests served, the conductors' CPU and database statements."""
    served_before = requests_served(ports)
    sent_before = statements_sent(ports)
    cpu_before = footprint.cpu_seconds(*conductors)
    time.sleep(seconds)
    answered = served_since(served_before, ports)
    return {'requests': sum(answered.values()) / seconds,
            'updates': answered.get('service_update', 0) / seconds,
            'cpu': (footprint.cpu_seconds(*conductors) - cpu_before)
            / seconds,
            'statements': (statements_sent(ports) - sent_before)
            / seconds}

"""Waiting for a condition, as the benchmarks do between their steps."""

import time


def until(fetch, done, what: str, timeout: float = 300.0,
          interval: float = 0.02):
    """``fetch()`` until ``done(value)``; that value. Ends the benchmark,
    naming ``what``, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        time.sleep(interval)
    raise SystemExit('timed out waiting for %s' % what)


def drained(volumes, admin, pool: str, expected: int | None = None,
            timeout: float = 1800.0, interval: float = 0.2) -> dict:
    """The drain of ``pool`` once it has ended; ends the benchmark unless
    it moved every volume it listed (``expected`` of them, if given)."""
    drain = until(lambda: volumes.pool_drain_get(admin, pool),
                  lambda d: d['status'] != 'running', 'the drain',
                  timeout=timeout, interval=interval)
    done = drain['progress']['volumes_done']
    if done != len(drain['volumes']) or (expected is not None
                                         and done != expected):
        raise SystemExit('the drain left volumes behind: %s'
                         % drain['volumes'])
    return drain

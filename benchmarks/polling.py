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

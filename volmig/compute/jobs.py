"""Runs driver jobs in the background and reports their progress."""

from collections.abc import Callable
import threading
import time

import futurist
from oslo_log import log as logging

from volmig import concurrency
from volmig import metrics
from volmig.compute.drivers import base

LOG = logging.getLogger(__name__)
# Seconds before a job's second poll; each next one waits twice as long,
# up to [compute] job_poll_interval. The commit of a migration's overlay
# takes tens of milliseconds, and its end is the migration's: a fixed
# half-second poll made it wait up to that long, at a few more polls of
# a long job.
FIRST_POLL = 0.02


class JobRunner:
    """A futurist pool; each job is polled until it finishes.

    ``report(progress)`` is called once at the end and, before that, when
    progress has moved by a ``reports_per_job``-th of the total and
    ``report_interval`` seconds have passed, whichever is rarer: a
    thousand jobs at once must not flood the conductor. ``on_error(exc)``
    is called if the job raises.
    """

    def __init__(self, workers: int, poll_interval: float,
                 report_interval: float = 1.0, reports_per_job: int = 20):
        self._executor = futurist.ThreadPoolExecutor(max_workers=workers)
        self._poll_interval = poll_interval
        self._report_interval = report_interval
        self._reports_per_job = reports_per_job
        self._stopping = threading.Event()
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, name: str, job: base.Job,
               report: Callable[[base.JobProgress], None],
               on_error: Callable[[Exception], None]
               ) -> futurist.Future | None:
        with self._lock:
            if name in self._running:
                # Two pollers of one job would each see it end, and the
                # second would take its disappearance for a failure.
                LOG.info('Job %s is already followed here', name)
                return None
            self._running.add(name)
        try:
            return self._executor.submit(self._run, name, job, report,
                                         on_error)
        except RuntimeError:
            # Stopping: the job is reconciled at the next start.
            LOG.info('Job %s not followed: the agent is stopping', name)
            with self._lock:
                self._running.discard(name)
            return None

    def running(self, name: str) -> bool:
        with self._lock:
            return name in self._running

    def _run(self, name, job, report, on_error) -> None:
        began = time.monotonic()
        try:
            self._poll(name, job, report)
            metrics.JOB_SECONDS.labels(kind=type(job).__name__).observe(
                time.monotonic() - began)
        except Exception as exc:
            LOG.exception('Job %s failed', name)
            self._done(name)
            on_error(exc)
        finally:
            self._done(name)

    def _done(self, name: str) -> None:
        with self._lock:
            self._running.discard(name)

    def _due(self, progress, reported, reported_at) -> bool:
        if progress.finished:
            return True
        if reported is None:
            return progress.bytes_total > 0
        step = progress.bytes_total / self._reports_per_job
        return (progress.bytes_done - reported.bytes_done >= step
                and time.monotonic() - reported_at >= self._report_interval)

    def _poll(self, name, job, report) -> None:
        reported, reported_at, copied = None, 0.0, 0
        pause = min(FIRST_POLL, self._poll_interval)
        while not self._stopping.is_set():
            progress = job.poll()
            if progress.bytes_done > copied:
                metrics.BYTES_COPIED.inc(progress.bytes_done - copied)
                copied = progress.bytes_done
            if self._due(progress, reported, reported_at):
                report(progress)
                reported, reported_at = progress, time.monotonic()
            if progress.finished:
                return
            self._stopping.wait(pause)
            pause = min(pause * 2, self._poll_interval)
        LOG.info('Job %s left unfinished because the agent is stopping; '
                 'it is reconciled at the next start.', name)

    def stop(self) -> None:
        self._stopping.set()
        concurrency.stop_executor(self._executor)

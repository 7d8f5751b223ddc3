"""Runs driver jobs in the background and reports their progress."""

from collections.abc import Callable
import threading

import futurist
from oslo_log import log as logging

from volmig.compute.drivers import base

LOG = logging.getLogger(__name__)


class JobRunner:
    """A futurist pool; each job is polled until it finishes.

    ``report(progress)`` is called whenever progress moves, and once at the
    end; ``on_error(exc)`` if the job raises.
    """

    def __init__(self, workers: int, poll_interval: float):
        self._executor = futurist.ThreadPoolExecutor(max_workers=workers)
        self._poll_interval = poll_interval
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
        return self._executor.submit(self._run, name, job, report, on_error)

    def running(self, name: str) -> bool:
        with self._lock:
            return name in self._running

    def _run(self, name, job, report, on_error) -> None:
        try:
            self._poll(name, job, report)
        except Exception as exc:
            LOG.exception('Job %s failed', name)
            self._done(name)
            on_error(exc)
        finally:
            self._done(name)

    def _done(self, name: str) -> None:
        with self._lock:
            self._running.discard(name)

    def _poll(self, name, job, report) -> None:
        last = None
        while not self._stopping.is_set():
            progress = job.poll()
            if progress != last or progress.finished:
                report(progress)
                last = progress
            if progress.finished:
                return
            self._stopping.wait(self._poll_interval)
        LOG.info('Job %s left unfinished because the agent is stopping; '
                 'it is reconciled at the next start.', name)

    def stop(self) -> None:
        self._stopping.set()
        self._executor.shutdown(wait=True)

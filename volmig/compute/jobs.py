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

    def submit(self, name: str, job: base.Job,
               report: Callable[[base.JobProgress], None],
               on_error: Callable[[Exception], None]) -> futurist.Future:
        return self._executor.submit(self._run, name, job, report, on_error)

    def _run(self, name, job, report, on_error) -> None:
        last = None
        try:
            while not self._stopping.is_set():
                progress = job.poll()
                if progress != last or progress.finished:
                    report(progress)
                    last = progress
                if progress.finished:
                    return
                self._stopping.wait(self._poll_interval)
            LOG.info('Job %s left unfinished because the agent is '
                     'stopping; it is resumed at the next start.', name)
        except Exception as exc:
            LOG.exception('Job %s failed', name)
            on_error(exc)

    def stop(self) -> None:
        self._stopping.set()
        self._executor.shutdown(wait=True)

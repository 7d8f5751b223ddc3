"""The job runner keeps progress reports bounded and counts the bytes."""

import threading

from oslotest import base
import prometheus_client

from volmig.compute import jobs
from volmig.compute.drivers import base as driver_base

TOTAL = 1000


class StepJob(driver_base.Job):
    """A job that moves one byte per poll."""

    def __init__(self):
        self.done = 0

    def poll(self):
        self.done += 1
        return driver_base.JobProgress(self.done, TOTAL, self.done == TOTAL)


class JobRunnerTest(base.BaseTestCase):

    def _run(self, **limits):
        runner = jobs.JobRunner(1, 0, **limits)
        self.addCleanup(runner.stop)
        reports, ended = [], threading.Event()

        def report(progress):
            reports.append(progress)
            if progress.finished:
                ended.set()
        copied = self._copied()
        runner.submit('job', StepJob(), report, self.fail)
        self.assertTrue(ended.wait(60))
        return reports, self._copied() - copied

    @staticmethod
    def _copied() -> float:
        return prometheus_client.REGISTRY.get_sample_value(
            'volmig_job_bytes_copied_total') or 0

    def test_a_few_reports_per_job(self):
        reports, copied = self._run(report_interval=0, reports_per_job=4)
        self.assertEqual(TOTAL, copied)
        self.assertLessEqual(len(reports), 4 + 1)
        self.assertTrue(reports[-1].finished)
        done = [progress.bytes_done for progress in reports]
        self.assertEqual(sorted(done), done)

    def test_the_rarer_limit_wins(self):
        reports, _ = self._run(report_interval=3600, reports_per_job=1000)
        # Nothing between the first report and the end within an hour.
        self.assertEqual([1, TOTAL], [p.bytes_done for p in reports])

    def test_a_job_is_polled_soon_then_less_often(self):
        """A short job (an overlay's commit) is seen done within tens of
        milliseconds; a long one is polled every job_poll_interval."""
        waits = []

        class Stopping:
            # Records each pause instead of sleeping it.
            def is_set(self):
                return False

            def wait(self, seconds):
                waits.append(round(seconds, 3))

        runner = jobs.JobRunner(1, 0.5)
        runner._stopping = Stopping()
        job = StepJob()
        job.done = TOTAL - 8
        runner._poll('job', job, lambda progress: None)
        self.assertEqual([0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5], waits)

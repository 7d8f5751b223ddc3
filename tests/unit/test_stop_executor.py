"""Stopping an executor whose work submits more work."""

import threading
import time

import futurist
from oslotest import base

from volmig import concurrency


class StopExecutorTest(base.BaseTestCase):

    def test_a_worker_that_submits_while_stopping_does_not_hang_it(self):
        executor = futurist.ThreadPoolExecutor(max_workers=1)
        running, release = threading.Event(), threading.Event()
        refused = []

        def work():
            running.set()
            release.wait()
            # A migration's end starting a queued one, as the service
            # stops: futurist's own shutdown(wait=True) deadlocks here.
            try:
                executor.submit(lambda: None)
            except RuntimeError as exc:
                refused.append(str(exc))

        executor.submit(work)
        running.wait()
        stopper = threading.Thread(target=concurrency.stop_executor,
                                   args=(executor,), daemon=True)
        stopper.start()
        while executor.alive:  # it takes no more work from here on
            time.sleep(0.001)
        release.set()
        stopper.join(60)
        self.assertFalse(stopper.is_alive(), 'stop_executor hung')
        self.assertEqual(1, len(refused), refused)
        self.assertIn('shutdown', refused[0])

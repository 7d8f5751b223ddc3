"""The qemu driver's block jobs, polled against a QEMU that shows a job
ready for a while after it took the complete."""

import threading
from unittest import mock

from oslotest import base

from volmig.compute.drivers.qemu import jobs


class _Guest:
    """Answers query-jobs with ``statuses`` in turn; refuses a complete
    once the job has concluded, as QEMU does."""

    def __init__(self, job_id: str, statuses: list[str]):
        self.lock = threading.Lock()
        self.disks = {'v1': {'volume_id': 'v1', 'slot': 1, 'gen': 0}}
        self.job_id = job_id
        self.statuses = statuses
        self.completes = 0

    def execute(self, command, **arguments):
        if command == 'query-jobs':
            status = self.statuses.pop(0)
            return [{'id': self.job_id, 'status': status,
                     'current-progress': 1, 'total-progress': 1}]
        return {}

    def timed(self, command, **arguments):
        self.completes += 1
        return 0.001


class CompleteOnceTest(base.BaseTestCase):

    def test_a_commit_is_completed_once(self):
        driver = mock.Mock()
        job = jobs.CommitJob(driver, None, 'v1', 'm1')
        guest = _Guest(job.job_id, ['ready', 'ready', 'ready'])
        job._guest = guest
        for _ in range(3):
            self.assertFalse(job.poll().finished)
        self.assertEqual(1, guest.completes)
        driver.journal.record.assert_called_once_with('m1', 'job_complete')

    def test_a_mirror_is_pivoted_once(self):
        driver = mock.Mock()
        guest = _Guest('mirror-a1', ['ready', 'ready'])
        job = jobs.MirrorJob(driver, guest, guest.disks['v1'],
                             {'attachment_id': 'a1'}, '/new')
        for _ in range(2):
            self.assertFalse(job.poll().finished)
        self.assertEqual(1, guest.completes)
        driver.journal.record.assert_called_once_with('swap-a1', 'pivot')

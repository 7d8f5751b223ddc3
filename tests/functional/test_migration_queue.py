"""Concurrency caps: starts over a cap wait as ``queued``, in order."""

import futurist

from tests.functional import base
from volmig import states


class HostCapTest(base.ServicesTestCase):

    COMPUTES = 2

    def configure(self):
        self.conf_fixture.conf(max_concurrent_volume_migrations=1,
                                 group='compute')

    def running_on(self, host):
        return [m for m in self.client.list(self.ctxt, host=host)
                if m['status'] not in states.TERMINAL | {states.QUEUED}]

    def test_queued_in_order_cancelled_while_queued_and_started_later(self):
        a_server, a = self.create_server(host='compute-1')
        b_server, b = self.create_server(host='compute-1')
        c_server, c = self.create_server(host='compute-1')
        d_server, d = self.create_server(host='compute-2')

        first = self.client.start(self.ctxt, a['attachment_id'])
        self.assertEqual(states.STARTED, first['status'])
        second = self.client.start(self.ctxt, b['attachment_id'],
                                   wait=False)
        third = self.client.start(self.ctxt, c['attachment_id'], wait=False)
        for held in (second, third):
            self.assertEqual(states.QUEUED, held['status'])
            self.assertIn('host compute-1 is migrating 1 volume(s)',
                          held['queued_reason'])
            self.assertIn('[compute] max_concurrent_volume_migrations',
                          held['queued_reason'])
        # Held back, yet locked: the server takes no other task.
        self.assertEqual(states.TASK_VOLUME_MIGRATING,
                         self.conductor.instance_get(
                             self.admin, b_server['uuid'])['task_state'])
        self.assertFalse(self.fake_disk(b_server, b).on_overlay)
        # Another host has its own cap.
        other = self.client.start(self.ctxt, d['attachment_id'])
        self.assertEqual(states.STARTED, other['status'])
        self.assertEqual([first['id']],
                         [m['id'] for m in self.running_on('compute-1')])

        # Cancelled while queued: no agent ever heard of it.
        cancelled = self.client.cancel(self.ctxt, c['attachment_id'])
        self.assertEqual(states.CANCELLED, cancelled['status'])
        self.assertIsNone(self.conductor.instance_get(
            self.admin, c_server['uuid'])['task_state'])
        self.assertFalse(self.fake_disk(c_server, c).on_overlay)

        # The first ends: the oldest queued one starts, and only it.
        self.client.cancel(self.ctxt, a['attachment_id'])
        self.client.wait_for(self.ctxt, first['id'], states.CANCELLED)
        started = self.client.wait_for(self.ctxt, second['id'],
                                       states.STARTED, timeout=30)
        self.assertIsNone(started['queued_reason'])
        self.assertTrue(self.fake_disk(b_server, b).on_overlay)
        self.assertEqual([second['id']],
                         [m['id'] for m in self.running_on('compute-1')])
        self.assertEqual(states.CANCELLED,
                         self.client.get(self.ctxt, third['id'])['status'])

        # It goes on as any other migration.
        dst = self.dst_attachment(b_server, b)
        self.client.complete(self.ctxt, b['attachment_id'], dst['id'])
        self.client.wait_for(self.ctxt, second['id'], states.COMPLETED)
        self.assertEqual(dst['id'], self.conductor.instance_get(
            self.admin, b_server['uuid'])['block_devices'][0][
                'attachment_id'])


class ClusterCapTest(base.ServicesTestCase):

    COMPUTES = 2

    def configure(self):
        self.conf_fixture.conf(max_concurrent_volume_migrations=1,
                                 group='conductor')

    def test_start_waits_until_a_slot_frees(self):
        a_server, a = self.create_server(host='compute-1')
        b_server, b = self.create_server(host='compute-2')
        first = self.client.start(self.ctxt, a['attachment_id'])
        with futurist.ThreadPoolExecutor(max_workers=1) as executor:
            # The block-storage service's start blocks while queued: when
            # it returns, nothing writes to src.
            waiting = executor.submit(self.client.start, self.ctxt,
                                      b['attachment_id'])
            queued = self.wait_until(
                lambda: self.client.list(self.ctxt,
                                         instance_uuid=b_server['uuid']),
                what='the second start to be recorded')[0]
            self.assertEqual(states.QUEUED, queued['status'])
            self.assertIn('the cluster is migrating 1 volume(s)',
                          queued['queued_reason'])
            self.assertFalse(waiting.done())
            self.client.cancel(self.ctxt, a['attachment_id'])
            second = waiting.result(timeout=60)
        self.assertEqual(states.STARTED, second['status'])
        self.assertEqual(queued['id'], second['id'])
        self.assertTrue(self.fake_disk(b_server, b).on_overlay)
        self.assertEqual(states.CANCELLED,
                         self.client.get(self.ctxt, first['id'])['status'])

"""Which cap holds a start back (``conductor.queue.holding_cap``)."""

from oslotest import base

from volmig.conductor import queue


def running(*pairs):
    return [{'host': host, 'volume_id': volume} for host, volume in pairs]


class HoldingCapTest(base.BaseTestCase):

    def test_no_cap_holds_nothing(self):
        self.assertIsNone(queue.holding_cap(
            running(('h1', 'v1'), ('h1', 'v2')), 'h1', 'v3', 0, 0))

    def test_host_cap_counts_volumes_on_that_host_only(self):
        busy = running(('h1', 'v1'), ('h1', 'v2'), ('h2', 'v3'))
        reason = queue.holding_cap(busy, 'h1', 'v4', 2, 0)
        self.assertIn('host h1 is migrating 2 volume(s)', reason)
        self.assertIsNone(queue.holding_cap(busy, 'h2', 'v4', 2, 0))

    def test_attachments_of_one_volume_count_once(self):
        # Three attachments of v1 on h1: one volume under a cap of 2.
        busy = running(('h1', 'v1'), ('h1', 'v1'), ('h1', 'v1'))
        self.assertIsNone(queue.holding_cap(busy, 'h1', 'v2', 2, 0))

    def test_a_sibling_of_a_running_migration_is_never_held(self):
        # Holding it would wait on a slot its own volume holds.
        busy = running(('h1', 'v1'))
        self.assertIsNone(queue.holding_cap(busy, 'h1', 'v1', 1, 1))
        self.assertIsNotNone(queue.holding_cap(busy, 'h1', 'v2', 1, 0))

    def test_cluster_cap_counts_every_host(self):
        busy = running(('h1', 'v1'), ('h2', 'v2'))
        reason = queue.holding_cap(busy, 'h3', 'v3', 0, 2)
        self.assertIn('the cluster is migrating 2 volume(s)', reason)
        self.assertIn('[conductor] max_concurrent_volume_migrations', reason)

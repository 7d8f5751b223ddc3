"""A drain's notifications: its start and end, and each of its volumes
as planned and each time its state changes, with the servers it is
attached to; checked against doc/notification_samples."""

import time

from oslo_messaging.notify import _impl_test

from tests import fixtures as volmig_fixtures
from tests import notification_samples
from tests.unit import test_volume_mover
from volmig.conf import CONF
from volmig.volume_service import drain


class DrainNotificationTest(test_volume_mover.MoverBase):

    def setUp(self):
        super().setUp()
        CONF.set_override('driver', ['test'],
                          group='oslo_messaging_notifications')
        self.useFixture(volmig_fixtures.RPCFixture())
        _impl_test.reset()
        self.addCleanup(_impl_test.reset)
        self.drainer = drain.Drainer(self.volumes, self.mover,
                                     'volume-host')

    def messages(self, phase: str) -> list[dict]:
        return [message for _c, message, _p, _r in _impl_test.NOTIFICATIONS
                if message['event_type'] == 'volume_pool.drain.' + phase]

    def events(self, phase: str) -> list[dict]:
        return [message['payload']['volmig_object.data']
                for message in self.messages(phase)]

    def test_a_drain_sends_its_start_each_volume_and_its_end(self):
        detached = self.make_volume()
        self.drainer.drain(self.service, 'pool-a', 'pool-b')
        for _ in range(600):
            self.drainer.run_once()
            if self.events('end'):
                break
            time.sleep(0.05)  # A pass sees a move under way until it ends.
        [start], [end] = self.events('start'), self.events('end')
        self.assertEqual(('volume-host', 'running', {'pending': 2}),
                         (start['host'], start['status'], start['volumes']))
        self.assertEqual(('completed', {'done': 2}),
                         (end['status'], end['volumes']))
        # Each volume: planned, begun, done; the attached one names its
        # server.
        steps = {}
        for event in self.events('volume'):
            steps.setdefault(event['volume_id'], []).append(
                (event['old_state'], event['state'], event['action'],
                 tuple(event['instance_uuids'])))
        self.assertEqual({
            self.bdm['volume_id']: [
                (None, 'pending', 'live', (self.instance['uuid'],)),
                ('pending', 'migrating', 'live', (self.instance['uuid'],)),
                ('migrating', 'done', 'live', (self.instance['uuid'],))],
            detached['id']: [(None, 'pending', 'copy', ()),
                             ('pending', 'migrating', 'copy', ()),
                             ('migrating', 'done', 'copy', ())]},
            steps)
        # The attached volume's plan stands for every volume's: the
        # order the two are planned in is the database's.
        [planned] = [message for message in self.messages('volume')
                     if message['payload']['volmig_object.data'][
                         'instance_uuids'] and message['payload'][
                             'volmig_object.data']['old_state'] is None]
        notification_samples.check(self, {
            'volume_pool.drain.start': notification_samples.stable(
                self.messages('start')[0]),
            'volume_pool.drain.volume': notification_samples.stable(planned),
            'volume_pool.drain.end': notification_samples.stable(
                self.messages('end')[0])}, ('volume_pool.drain.',))

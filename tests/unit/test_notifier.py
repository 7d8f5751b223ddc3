"""A notification is made only where a driver will send it: with no
``[oslo_messaging_notifications] driver``, no payload is built."""

import fixtures
from oslo_messaging.notify import _impl_test
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import context
from volmig import notifications
from volmig.conf import CONF
from volmig.notifications import objects

MIGRATION = {'id': 'm-1', 'instance_uuid': 'i-1', 'volume_id': 'v-1',
             'src_attachment_id': 'a-1', 'dst_attachment_id': None,
             'mode': 'live', 'host': 'h1', 'status': 'started'}


class NotifierTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())
        _impl_test.reset()
        self.addCleanup(_impl_test.reset)
        self.made = self.useFixture(fixtures.MockPatchObject(
            objects.VolumeMigrationUpdatePayload, 'of',
            wraps=objects.VolumeMigrationUpdatePayload.of)).mock

    def notify(self, drivers: list[str]) -> list:
        CONF.set_override('driver', drivers,
                          group='oslo_messaging_notifications')
        self.useFixture(volmig_fixtures.RPCFixture())
        notifier = notifications.Notifier('volmig-conductor.h1')
        notifier.notify(context.get_admin_context(), notifications.MIGRATION,
                        'update', dict(MIGRATION, old_status='starting'))
        return [message['event_type']
                for _c, message, _p, _r in _impl_test.NOTIFICATIONS]

    def test_no_driver_no_payload(self):
        # oslo.messaging's own notifier takes an empty list of drivers
        # for one that sends: the payload was built, then sent nowhere.
        self.assertEqual([], self.notify([]))
        self.assertEqual(0, self.made.call_count)

    def test_noop_no_payload(self):
        self.assertEqual([], self.notify(['noop']))
        self.assertEqual(0, self.made.call_count)

    def test_a_driver_is_sent_the_payload(self):
        self.assertEqual(['volume_migration.update'], self.notify(['test']))
        self.assertEqual(1, self.made.call_count)

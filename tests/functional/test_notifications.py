"""Every versioned notification the services send in a server's life
and its migrations matches its sample in doc/ (tests/notification_samples);
a migration's phases are sent in the order the conductor records them."""

import datetime

from oslo_messaging.notify import _impl_test
from oslo_utils import timeutils
import sqlalchemy as sa

from tests import notification_samples
from tests.functional import base
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conf import CONF
from volmig.db import api as db_api
from volmig.db import models
from volmig.db import services as service_db


class NotificationSampleTest(base.ServicesTestCase):

    def configure(self):
        self.conf_fixture.conf(driver=['test'],
                               group='oslo_messaging_notifications')
        _impl_test.reset()

    def _migrate(self, server, bdm, complete):
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        if complete:
            dst = self.dst_attachment(server, bdm)
            self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
            final = states.COMPLETED
        else:
            self.client.cancel(self.ctxt, bdm['attachment_id'])
            final = states.CANCELLED
        self.client.wait_for(self.ctxt, migration['id'], final)

    def test_samples(self):
        server, bdm = self.create_server(attach_mode='ro')
        extra = self.volumes.create_volume(self.admin, 16)
        self.conductor.attach_volume(self.user, server['uuid'], extra['id'],
                                     'rw')
        new = self.volumes.create_volume(self.admin, 16)
        self.conductor.swap_volume(self.admin, server['uuid'], extra['id'],
                                   new['id'])
        self.wait_until(lambda: self.conductor.instance_get(
            self.admin, server['uuid'])['task_state'] is None,
            what='the swap to end')
        self._migrate(server, bdm, complete=False)
        self._migrate(server, bdm, complete=True)
        sent = self.wait_until(
            lambda: (lambda found: found if 'volume_migration.complete.end'
                     in found else None)(notification_samples.sent()),
            what='the last notification')

        notification_samples.check(self, sent,
                                   ('instance.', 'volume_migration.'))


class MigrationPhaseTest(base.ServicesTestCase):
    """``volume_migration.update``: one per status the conductor records,
    each naming the status it replaced."""

    def configure(self):
        self.conf_fixture.conf(driver=['test'],
                               group='oslo_messaging_notifications')
        _impl_test.reset()

    def updates(self, migration_id: str) -> list:
        return [(message['priority'], message['payload'][
            'volmig_object.data']) for _c, message, _p, _r
            in _impl_test.NOTIFICATIONS
            if message['event_type'] == 'volume_migration.update'
            and message['payload']['volmig_object.data']['id']
            == migration_id]

    def chain(self, migration_id: str) -> list:
        return [(data['old_status'], data['status'])
                for _priority, data in self.updates(migration_id)]

    def test_a_completed_migration_sends_each_phase_in_order(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        dst = self.dst_attachment(server, bdm)
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        chain = self.wait_until(
            lambda: (lambda found: found if found and found[-1][1]
                     == states.COMPLETED else None)(
                         self.chain(migration['id'])),
            what='the last phase')
        # Each names the one before it; the fake driver's commit ends at
        # its first look, so committing may be skipped, as the state
        # machine allows.
        statuses = [None] + [new for _old, new in chain]
        self.assertEqual(list(zip(statuses, statuses[1:], strict=False)),
                         chain)
        self.assertEqual([states.STARTING, states.STARTED,
                          states.COMPLETING, states.SRC_RELEASED],
                         statuses[1:5])
        self.assertEqual(states.COMPLETED, statuses[-1])
        self.assertEqual({'INFO'}, {priority for priority, _data
                                    in self.updates(migration['id'])})

    def test_a_failure_is_sent_with_its_phase_and_reason(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        conductor = self.services['conductor-host'].manager.migrations
        conductor.fail(self.admin, migration['id'], 'the array went away',
                       False)
        priority, data = self.updates(migration['id'])[-1]
        self.assertEqual('ERROR', priority)
        self.assertEqual((states.STARTED, states.ERROR, states.STARTED,
                          'the array went away'),
                         (data['old_status'], data['status'],
                          data['error_phase'], data['error_reason']))


class ServiceStatusTest(base.ServicesTestCase):
    """``service.down`` and ``service.up``: once each, whichever healer
    sees the change first."""

    def configure(self):
        self.conf_fixture.conf(driver=['test'],
                               group='oslo_messaging_notifications')
        _impl_test.reset()

    def sent_for(self, host: str) -> list:
        return [(message['event_type'], message['priority'])
                for _c, message, _p, _r in _impl_test.NOTIFICATIONS
                if message['event_type'].startswith('service.')
                and message['payload']['volmig_object.data']['host']
                == host]

    def heartbeat(self, seen_at) -> None:
        service_db.update(self.admin, compute_rpcapi.BINARY, 'gone-host',
                          compute_rpcapi.TOPIC, '1.5', {})
        with db_api.transaction(self.admin) as session:
            session.execute(sa.update(models.Service).where(
                models.Service.host == 'gone-host').values(
                    last_seen_at=seen_at))

    def test_a_silent_service_is_announced_down_then_up_once_each(self):
        healer = self.services['conductor-host'].manager.healer
        long_ago = timeutils.utcnow() - datetime.timedelta(
            seconds=3 * CONF.service_down_time)
        self.heartbeat(long_ago)
        healer.run(self.admin)
        healer.run(self.admin)
        self.assertEqual([('service.down', 'ERROR')],
                         self.sent_for('gone-host'))
        self.heartbeat(timeutils.utcnow())
        healer.run(self.admin)
        healer.run(self.admin)
        self.assertEqual([('service.down', 'ERROR'), ('service.up', 'INFO')],
                         self.sent_for('gone-host'))
        notification_samples.check(
            self, {event: message for event, message
                   in notification_samples.sent().items()
                   if event.startswith('service.')}, ('service.',))

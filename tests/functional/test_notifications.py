"""Every versioned notification matches its sample in doc/.

The samples are the contract with consumers: a change of shape fails
here until the sample (and the payload version) is changed too. Set
``VOLMIG_WRITE_SAMPLES=1`` to rewrite them from what the code sends.
"""

import json
import os
import re

from oslo_messaging.notify import _impl_test

from tests.functional import base
from volmig import states

SAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                       'notification_samples')
UUID = re.compile('[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                  '[0-9a-f]{12}')
PLACEHOLDER = '00000000-0000-0000-0000-000000000000'


def _stable(value):
    """The notification without what changes from run to run."""
    if isinstance(value, dict):
        return {key: _stable(item) for key, item in value.items()
                if key not in ('message_id', 'timestamp')}
    if isinstance(value, list):
        return [_stable(item) for item in value]
    if isinstance(value, str):
        return UUID.sub(PLACEHOLDER, value)
    return value


class NotificationSampleTest(base.ServicesTestCase):

    def configure(self):
        self.conf_fixture.conf(driver=['test'],
                               group='oslo_messaging_notifications')
        _impl_test.reset()

    def _sent(self) -> dict:
        """The first notification of each event type, by type."""
        sent: dict = {}
        for _ctxt, message, _priority, _retry in _impl_test.NOTIFICATIONS:
            sent.setdefault(message['event_type'], _stable(message))
        return sent

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
                     in found else None)(self._sent()),
            what='the last notification')

        if os.environ.get('VOLMIG_WRITE_SAMPLES'):
            for event_type, message in sent.items():
                with open(os.path.join(SAMPLES, event_type + '.json'),
                          'w') as sample:
                    json.dump(message, sample, indent=4, sort_keys=True)
                    sample.write('\n')
        names = sorted(name[:-len('.json')]
                       for name in os.listdir(SAMPLES))
        self.assertEqual(names, sorted(sent))
        for name in names:
            with open(os.path.join(SAMPLES, name + '.json')) as sample:
                self.assertEqual(json.load(sample), sent[name], name)

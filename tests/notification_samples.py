"""The notifications a test caught, against doc/notification_samples.

The samples are the contract with consumers: a change of shape fails
until the sample (and the payload's version) is changed too. Set
``VOLMIG_WRITE_SAMPLES=1`` to rewrite them from what the code sends.
"""

import json
import os
import re

from oslo_messaging.notify import _impl_test

SAMPLES = os.path.join(os.path.dirname(__file__), '..', 'doc',
                       'notification_samples')
UUID = re.compile('[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                  '[0-9a-f]{12}')
PLACEHOLDER = '00000000-0000-0000-0000-000000000000'
WHEN = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?')
WHEN_PLACEHOLDER = '2026-01-01T00:00:00Z'


def stable(value):
    """The notification without what changes from run to run."""
    if isinstance(value, dict):
        return {key: stable(item) for key, item in value.items()
                if key not in ('message_id', 'timestamp')}
    if isinstance(value, list):
        return [stable(item) for item in value]
    if isinstance(value, str):
        return WHEN.sub(WHEN_PLACEHOLDER, UUID.sub(PLACEHOLDER, value))
    return value


def sent() -> dict:
    """The first notification of each event type, by type."""
    found: dict = {}
    for _ctxt, message, _priority, _retry in _impl_test.NOTIFICATIONS:
        found.setdefault(message['event_type'], stable(message))
    return found


def sample_names() -> list[str]:
    return sorted(name[:-len('.json')] for name in os.listdir(SAMPLES))


def check(test, caught: dict, prefixes: tuple[str, ...]) -> None:
    """Every sample of an event type starting with one of ``prefixes``
    was caught, and each caught one is its sample."""
    if os.environ.get('VOLMIG_WRITE_SAMPLES'):
        for event_type, message in caught.items():
            with open(os.path.join(SAMPLES, event_type + '.json'),
                      'w') as sample:
                json.dump(message, sample, indent=4, sort_keys=True)
                sample.write('\n')
    test.assertEqual([name for name in sample_names()
                      if name.startswith(prefixes)], sorted(caught))
    for name in sorted(caught):
        with open(os.path.join(SAMPLES, name + '.json')) as sample:
            test.assertEqual(json.load(sample), caught[name], name)


def from_broker(url: str) -> list[dict]:
    """Every versioned notification on a RabbitMQ vhost's queues, as
    oslo.messaging published them there, taken off the queues."""
    from amqp import exceptions as amqp_exceptions
    import kombu  # The broker's tests only.

    found = []
    with kombu.Connection(url.replace('rabbit://', 'amqp://')) as conn:
        for priority in ('info', 'error'):
            # A queue never published to does not exist: that closes the
            # channel, so each queue gets its own.
            channel = conn.channel()
            try:
                while True:
                    message = channel.basic_get(
                        queue='versioned_notifications.' + priority,
                        no_ack=True)
                    if message is None:
                        break
                    found.append(json.loads(json.loads(message.body)[
                        'oslo.message']))
            except amqp_exceptions.NotFound:
                pass
    return found


def check_shapes(test, messages: list[dict]) -> None:
    """Each message is of an event type with a sample, of the sample's
    payload and version, with every field the sample has and none its
    payload does not have."""
    from oslo_versionedobjects import base

    classes = base.VersionedObjectRegistry.obj_classes()
    names = sample_names()
    for message in messages:
        event_type = message['event_type']
        test.assertIn(event_type, names, message)
        with open(os.path.join(SAMPLES, event_type + '.json')) as sample:
            expected = json.load(sample)['payload']
        payload = message['payload']
        test.assertEqual(
            (expected['volmig_object.name'],
             expected['volmig_object.version']),
            (payload['volmig_object.name'],
             payload['volmig_object.version']), event_type)
        fields = set(classes[payload['volmig_object.name']][0].fields)
        present = set(payload['volmig_object.data'])
        test.assertLessEqual(set(expected['volmig_object.data']), present,
                             event_type)
        test.assertLessEqual(present, fields, event_type)

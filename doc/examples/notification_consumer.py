"""A consumer of volmig's versioned notifications.

Run it beside services that have ``[oslo_messaging_notifications] driver =
messagingv2``::

    python doc/examples/notification_consumer.py \
        --transport-url rabbit://USER:PASSWORD@HOST:5672/volmig

It prints one line per event: the event type, the publisher, and the
migration or server it is about. Its own queue (``--pool``) gets a copy of
every event, so it does not take events from another consumer.
"""

import argparse
import threading

from oslo_config import cfg
import oslo_messaging as messaging


class Printer:
    """Endpoint for every priority volmig sends: info and error."""

    def __init__(self, count):
        self.left = count
        self.done = threading.Event()
        # The listener dispatches on a pool of threads.
        self._lock = threading.Lock()

    def _print(self, publisher_id, event_type, payload):
        data = payload.get('volmig_object.data', {})
        about = data.get('id') or data.get('uuid') or '-'
        status = data.get('status') or data.get('vm_state') or ''
        with self._lock:
            print('%s %s %s %s' % (event_type, publisher_id, about, status),
                  flush=True)
            self.left -= 1
            if self.left == 0:
                self.done.set()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._print(publisher_id, event_type, payload)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._print(publisher_id, event_type, payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--transport-url', required=True)
    parser.add_argument('--pool', default='volmig-example',
                        help='The consumer\'s own queue name.')
    parser.add_argument('--count', type=int, default=0,
                        help='Stop after this many events (0: never).')
    args = parser.parse_args()
    conf = cfg.ConfigOpts()
    conf([], project='volmig-example')
    transport = messaging.get_notification_transport(
        conf, url=args.transport_url)
    printer = Printer(args.count)
    listener = messaging.get_notification_listener(
        transport, [messaging.Target(topic='versioned_notifications',
                                     exchange='volmig')],
        [printer], pool=args.pool)
    listener.start()
    print('listening', flush=True)
    try:
        printer.done.wait()
    except KeyboardInterrupt:
        pass
    listener.stop()
    listener.wait()


if __name__ == '__main__':
    main()

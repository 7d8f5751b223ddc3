"""Checks behind ``GET /healthcheck`` (oslo.middleware's healthcheck).

volmig-api is healthy when it can reach its database and its RabbitMQ.
The broker check opens a connection of its own, so it tells the truth
even while oslo.messaging's pooled connections are reconnecting; its
answer is kept for ``[api] healthcheck_cache_seconds``, so frequent probes
do not each open one.
"""

import threading
import time
import typing

import kombu
import oslo_messaging as messaging
from oslo_middleware.healthcheck import pluginbase
import sqlalchemy as sa

from volmig.db import api as db_api

BROKER_TIMEOUT = 2


class DatabaseCheck(pluginbase.HealthcheckBaseExtension):

    def healthcheck(self, server_port):
        try:
            with db_api.get_engine().connect() as connection:
                connection.execute(sa.text('SELECT 1'))
        except Exception as exc:
            return pluginbase.HealthcheckResult(
                available=False, reason='database unreachable',
                details=type(exc).__name__)
        return pluginbase.HealthcheckResult(available=True,
                                            reason='database OK')


def _broker_connections(conf) -> list[kombu.Connection]:
    url = messaging.TransportURL.parse(conf, conf.transport_url)
    if url.transport != 'rabbit':
        return []
    rabbit = conf.oslo_messaging_rabbit
    ssl = rabbit.ssl and {key: value for key, value in (
        ('ca_certs', rabbit.ssl_ca_file), ('certfile', rabbit.ssl_cert_file),
        ('keyfile', rabbit.ssl_key_file)) if value}
    return [kombu.Connection(
        hostname=host.hostname, port=host.port or 5672,
        userid=host.username, password=host.password,
        virtual_host=url.virtual_host or '/', ssl=ssl or rabbit.ssl,
        connect_timeout=BROKER_TIMEOUT) for host in url.hosts]


class MessagingCheck(pluginbase.HealthcheckBaseExtension):
    """Any one broker of the cluster answering is enough."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        # (time of the look, its result)
        self._last: tuple[float, typing.Any] | None = None

    def healthcheck(self, server_port):
        with self._lock:
            now = time.monotonic()
            if self._last is None or (now - self._last[0] >=
                                      self.oslo_conf.api.healthcheck_cache_seconds):
                self._last = (now, self._look())
            return self._last[1]

    def _look(self):
        connections = _broker_connections(self.oslo_conf)
        if not connections:
            return pluginbase.HealthcheckResult(
                available=True, reason='RPC transport is not a broker')
        failures = []
        for connection in connections:
            with connection:
                try:
                    connection.ensure_connection(max_retries=1,
                                                 timeout=BROKER_TIMEOUT)
                except Exception as exc:
                    failures.append('%s: %s' % (connection.hostname,
                                                type(exc).__name__))
                    continue
            return pluginbase.HealthcheckResult(available=True,
                                                reason='RabbitMQ OK')
        return pluginbase.HealthcheckResult(
            available=False, reason='RabbitMQ unreachable',
            details='; '.join(failures))

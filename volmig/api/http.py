"""volmig-api's HTTP side: the REST app on cheroot's thread pool.

For production behind Apache or uWSGI, serve the module path
``volmig.wsgi.api:application`` instead.
"""

import ipaddress
import threading

from cheroot import wsgi as cheroot_wsgi
from oslo_log import log as logging
from oslo_service import service

from volmig.api.rest import app
from volmig.conf import CONF

LOG = logging.getLogger(__name__)


class HTTPService(service.Service):

    def __init__(self, host: str | None = None, port: int | None = None):
        super().__init__()
        self.bind = (host or CONF.api.listen,
                     CONF.api.port if port is None else port)
        self._server: cheroot_wsgi.Server | None = None
        self._thread: threading.Thread | None = None
        self._listening = threading.Event()

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError('the HTTP service is not started')
        host, port = self._server.bind_addr[:2]
        if ipaddress.ip_address(host).is_unspecified:
            host = '127.0.0.1'
        return 'http://%s:%d/v2.1' % (host, port)

    def start(self) -> None:
        server = cheroot_wsgi.Server(self.bind, app.build(),
                                     numthreads=CONF.api.workers,
                                     request_queue_size=CONF.api.backlog,
                                     server_name='volmig-api')
        # Bound, or refused (a port taken), before anything is served.
        server.prepare()
        self._server = server
        self._thread = threading.Thread(target=self._server.serve,
                                        name='volmig-api-http', daemon=True)
        self._thread.start()
        self._listening.set()
        LOG.info('REST API listening on %s', self.endpoint)

    def wait_ready(self, timeout: float) -> bool:
        return self._listening.wait(timeout)

    def stop(self, graceful: bool = False) -> None:
        if self._server is not None:
            self._server.stop()
            if self._thread is not None:
                self._thread.join()
            self._server = None
        super().stop(graceful)

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

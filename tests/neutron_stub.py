"""Neutron's API as far as Nova asks it about servers with no network.

Nova boots a server with ``networks: none`` without Neutron, but its
start, reboot and delete still list the server's ports and floating IPs,
and its API lists extensions: each list is empty here. Run as
``python -m tests.neutron_stub PORT``.
"""

import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):

    def _answer(self, status: int, body: dict | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b''
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (the standard library's name)
        # /v2.0/ports?device_id=... -> {"ports": []}
        resource = self.path.partition('?')[0].rstrip('/').rpartition(
            '/')[2].removesuffix('.json')
        self._answer(200, {resource.replace('-', '_'): []})

    def do_DELETE(self):  # noqa: N802
        self._answer(204)

    def log_message(self, *args):
        pass  # Nova's own logs say what it asked.


def main() -> None:
    server = http.server.ThreadingHTTPServer(('127.0.0.1',
                                              int(sys.argv[1])), Handler)
    server.serve_forever()


if __name__ == '__main__':
    main()

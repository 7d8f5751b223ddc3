"""HAProxy in front of the tests' services, as a cloud runs it in front
of its databases and API services."""

import os
import socket
import subprocess  # nosec B404
import time

import fixtures


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class HAProxy(fixtures.Fixture):
    """``haproxy`` in the foreground on ``config`` (its text, written in
    ``directory``); set up once every port in ``ports`` accepts."""

    def __init__(self, directory: str, config: str, ports: list[int]):
        super().__init__()
        self.path = os.path.join(directory, 'haproxy.cfg')
        self.config = config
        self.ports = ports

    def _setUp(self) -> None:
        with open(self.path, 'w') as cfg:
            cfg.write(self.config)
        self.process = subprocess.Popen(  # nosec B603 B607
            ['haproxy', '-f', self.path, '-db'], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(stop, self.process)
        deadline = time.monotonic() + 30
        for port in self.ports:
            while True:
                try:
                    socket.create_connection(('127.0.0.1', port), 1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

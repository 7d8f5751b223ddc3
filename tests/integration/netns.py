"""Hosts in network namespaces, on a bridge in the test's namespace.

Each host gets a namespace with ``lo`` and ``eth0``, a veth whose other
end is on the bridge. Cutting a host off sets that other end down, as a
pulled cable would. Everything is removed afterwards, processes left in
a namespace included.
"""

import os
import random
import signal
import subprocess
import uuid

import fixtures


def _ip(*args, check=True) -> subprocess.CompletedProcess:
    return subprocess.run(['ip', *args], check=check, capture_output=True,
                          text=True, timeout=60)


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None."""
    probe = 'volmig-probe-%s' % uuid.uuid4().hex[:6]
    try:
        made = _ip('netns', 'add', probe, check=False)
    except FileNotFoundError:
        return 'iproute2 (ip) is not installed'
    if made.returncode:
        return 'ip netns add failed: %s' % made.stderr.strip()
    _ip('netns', 'del', probe, check=False)
    return None


class Network(fixtures.Fixture):

    def __init__(self, hosts: list[str]):
        super().__init__()
        self.hosts = hosts

    def _setUp(self):
        tag = uuid.uuid4().hex[:6]
        subnet = '10.%d.%d' % (random.randint(100, 250),
                               random.randint(0, 255))
        self.bridge = 'vmbr' + tag
        _ip('link', 'add', self.bridge, 'type', 'bridge')
        self.addCleanup(_ip, 'link', 'del', self.bridge, check=False)
        _ip('addr', 'add', subnet + '.1/24', 'dev', self.bridge)
        _ip('link', 'set', self.bridge, 'up')
        self.gateway = subnet + '.1'
        self.namespaces: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self._cables: dict[str, str] = {}
        for number, host in enumerate(self.hosts, start=2):
            namespace = 'vm%s-%s' % (tag, host)
            _ip('netns', 'add', namespace)
            self.addCleanup(self._remove, namespace)
            cable, inside = 'vh%s%d' % (tag, number), 'vp%s%d' % (tag, number)
            _ip('link', 'add', cable, 'type', 'veth', 'peer', 'name', inside)
            _ip('link', 'set', inside, 'netns', namespace)
            inns = ['-n', namespace]
            _ip(*inns, 'link', 'set', inside, 'name', 'eth0')
            _ip(*inns, 'addr', 'add', '%s.%d/24' % (subnet, number), 'dev',
                'eth0')
            _ip(*inns, 'link', 'set', 'eth0', 'up')
            _ip(*inns, 'link', 'set', 'lo', 'up')
            _ip('link', 'set', cable, 'master', self.bridge, 'up')
            self.namespaces[host] = namespace
            self.addresses[host] = '%s.%d' % (subnet, number)
            self._cables[host] = cable

    def prefix(self, host: str) -> list[str]:
        return ['ip', 'netns', 'exec', self.namespaces[host]]

    def cut(self, host: str) -> None:
        _ip('link', 'set', self._cables[host], 'down')

    def restore(self, host: str) -> None:
        _ip('link', 'set', self._cables[host], 'up')

    @staticmethod
    def _remove(namespace: str) -> None:
        pids = _ip('netns', 'pids', namespace, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        _ip('netns', 'del', namespace, check=False)

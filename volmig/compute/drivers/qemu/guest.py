"""One guest: a QEMU process, its monitor, and its disks on record.

A guest lives in its own directory under the agent's state path: the QMP
socket, the pid file, QEMU's log, overlays, and ``guest.json``, which
records each disk's file, mode and block-node names. QEMU is started with
``-daemonize``, so it is no child of the agent and outlives a restart;
the agent finds it again from the pid file and reconnects.

No guest OS runs (the CPUs stay paused), so disks are hot-plugged into
PCIe root ports with native hot-plug: unplugging from a slot the guest
never powered on is immediate and needs no guest cooperation.
"""

import contextlib
import json
import os
import signal
import subprocess  # nosec B404
import threading
import time

from oslo_log import log as logging

from volmig import atomic_file
from volmig import exception
from volmig.compute.drivers.qemu import monitor as qmp

LOG = logging.getLogger(__name__)


def node_names(disk: dict) -> dict:
    """Block-node names of a disk; the generation changes on each switch.

    Short, because QEMU caps node names at 31 characters.
    """
    slot, gen = disk['slot'], disk['gen']
    names = {'device': 'vd%d' % slot, 'port': 'rp%d' % slot,
             'export': 'x%d' % slot,
             'base': 'v%dg%d' % (slot, gen), 'base_file': 'v%dg%df' % (slot,
                                                                     gen)}
    if disk.get('overlay'):
        ogen = disk['overlay']['gen']
        names['overlay'] = 'v%do%d' % (slot, ogen)
        names['overlay_file'] = 'v%do%df' % (slot, ogen)
    return names


def top_node(disk: dict) -> str:
    names = node_names(disk)
    return names.get('overlay', names['base'])


class Guest:

    def __init__(self, conf, directory: str, uuid: str,
                 loop: qmp.EventLoop):
        self.conf = conf
        self.uuid = uuid
        self.directory = directory
        self.lock = threading.RLock()
        self._loop = loop
        self._monitor: qmp.Monitor | None = None
        self.record: dict = {'uuid': uuid, 'disks': {}}

    # Paths.

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    @property
    def nbd_socket(self) -> str:
        return self.path('nbd.sock')

    # The record on disk.

    def load(self) -> 'Guest':
        with open(self.path('guest.json')) as handle:
            self.record = json.load(handle)
        return self

    def save(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        atomic_file.write_json(self.path('guest.json'), self.record)

    @property
    def disks(self) -> dict:
        return self.record['disks']

    def free_slot(self) -> int:
        used = {disk['slot'] for disk in self.disks.values()}
        for slot in range(self.conf.qemu.max_disks):
            if slot not in used:
                return slot
        raise exception.DriverError(
            action='attach a volume',
            reason='guest %s has no free disk slot (max_disks=%d)'
            % (self.uuid, self.conf.qemu.max_disks))

    # The process.

    def _pid(self) -> int | None:
        try:
            with open(self.path('qemu.pid')) as handle:
                pid = int(handle.read().strip())
            with open('/proc/%d/cmdline' % pid, 'rb') as handle:
                cmdline = handle.read()
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return None
        # The pid may have been reused after the guest died.
        return pid if ('guest=%s' % self.uuid).encode() in cmdline else None

    def is_running(self) -> bool:
        return self._pid() is not None

    def launch(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path('qmp.sock'))
        command = [
            self.conf.qemu.binary, '-name', 'guest=%s' % self.uuid,
            '-machine', 'q35,accel=tcg', '-S', '-nodefaults',
            '-m', str(self.conf.qemu.memory_mb), '-display', 'none',
            # Native PCIe hot-plug instead of ACPI: see the module doc.
            '-global', 'ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off',
            '-qmp', 'unix:%s,server=on,wait=off' % self.path('qmp.sock'),
            '-pidfile', self.path('qemu.pid'), '-D', self.path('qemu.log'),
            '-daemonize']
        for slot in range(self.conf.qemu.max_disks):
            command += ['-device', 'pcie-root-port,id=rp%d,chassis=%d'
                        % (slot, slot + 1)]
        result = subprocess.run(command, capture_output=True, text=True,  # nosec B603
                                check=False)
        if result.returncode:
            raise exception.DriverError(action='start guest %s' % self.uuid,
                                        reason=result.stderr.strip())
        self.connect()
        if self.conf.qemu.export_disks:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.nbd_socket)
            self.execute('nbd-server-start', addr={
                'type': 'unix', 'data': {'path': self.nbd_socket}})
        for disk in self.disks.values():
            self.plug(disk)

    def connect(self) -> None:
        self._monitor = qmp.Monitor(self._loop, self.path('qmp.sock'),
                                    self.uuid, self.conf.qemu.qmp_timeout)
        self._monitor.connect()

    def disconnect(self) -> None:
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None

    def shutdown(self, timeout: float = 10.0) -> None:
        pid = self._pid()
        if pid is None:
            self.disconnect()
            return
        with contextlib.suppress(exception.MonitorError, OSError,
                                 EOFError):
            self.execute('quit')
        self.disconnect()
        deadline = time.monotonic() + timeout
        while self._pid() is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self._pid() is not None:
            LOG.warning('Guest %s ignored quit; killing it', self.uuid)
            os.kill(pid, signal.SIGKILL)

    # QMP.

    def _connected(self, command: str) -> qmp.Monitor:
        if self._monitor is None:
            raise exception.DriverError(
                action=command, reason='guest %s is not running' % self.uuid)
        return self._monitor

    def execute(self, command: str, **arguments):
        return self._connected(command).execute(command, **arguments)

    def timed(self, command: str, **arguments) -> float:
        return self._connected(command).timed(command, **arguments)

    # Block nodes.

    def add_volume_node(self, node: str, path: str, read_only: bool) -> None:
        self.execute('blockdev-add', **{
            'driver': 'file', 'filename': path, 'node-name': node + 'f',
            'read-only': read_only,
            'cache': {'direct': self.conf.qemu.direct_io}})
        self.execute('blockdev-add', **{
            'driver': 'raw', 'file': node + 'f', 'node-name': node,
            'read-only': read_only})

    def add_overlay_node(self, node: str, path: str, backing: str | None,
                         read_only: bool = False) -> None:
        self.execute('blockdev-add', **{
            'driver': 'file', 'filename': path, 'node-name': node + 'f',
            'read-only': read_only})
        self.execute('blockdev-add', **{
            'driver': 'qcow2', 'file': node + 'f', 'node-name': node,
            'backing': backing, 'read-only': read_only})

    def delete_nodes(self, *nodes: str) -> None:
        """Delete format nodes and their file nodes, top first."""
        for node in nodes:
            self.execute('blockdev-del', **{'node-name': node})
            self.execute('blockdev-del', **{'node-name': node + 'f'})

    def node_size(self, node: str) -> int:
        for info in self.execute('query-named-block-nodes', flat=True):
            if info['node-name'] == node:
                return info['image']['virtual-size']
        raise exception.DriverError(action='find block node %s' % node,
                                    reason='guest %s has no such node'
                                    % self.uuid)

    def plug(self, disk: dict) -> None:
        """Open a disk's nodes and hot-plug its device."""
        names = node_names(disk)
        read_only = disk['attach_mode'] == 'ro'
        self.add_volume_node(names['base'], disk['path'], read_only)
        if (disk.get('overlay') or {}).get('sealed'):
            # The empty read-only shim of a read-only disk: not needed.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(disk['overlay']['path'])
            disk['overlay'] = None
        if disk.get('overlay'):
            # The guest was restarted in the middle of a live migration.
            self.add_overlay_node(names['overlay'], disk['overlay']['path'],
                                  backing=names['base'])
        top = top_node(disk)
        self.execute('device_add', driver='virtio-blk-pci', drive=top,
                     id=names['device'], bus=names['port'],
                     **{'share-rw': self.conf.qemu.export_disks})
        if self.conf.qemu.export_disks:
            self.execute('block-export-add', type='nbd', id=names['export'],
                         name=disk['volume_id'], writable=not read_only,
                         **{'node-name': top})

    def unplug(self, disk: dict) -> None:
        names = node_names(disk)
        if self.conf.qemu.export_disks:
            self.execute('block-export-del', id=names['export'], mode='hard')
            # Removal finishes once its clients are gone.
            while any(export['id'] == names['export']
                      for export in self.execute('query-block-exports')):
                time.sleep(0.01)
        self.execute('device_del', id=names['device'])
        nodes = [names['base']]
        if disk.get('overlay'):
            nodes.insert(0, names['overlay'])
        self.delete_nodes(*nodes)

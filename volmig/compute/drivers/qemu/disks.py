"""A QEMU guest's disks: their block nodes, and the devices that plug
them into the guest, over QMP.

Each disk sits in its own PCIe slot; its nodes are named after the slot
and a generation, which a switch onto dst bumps, so that old and new
nodes live side by side until the old are closed.
"""

import contextlib
import os
import threading
import time
import typing

from volmig import exception
from volmig.compute.drivers import guests
from volmig.compute.drivers.qemu import confinement

if typing.TYPE_CHECKING:
    from volmig.compute.drivers.qemu import monitor as qmp


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


class GuestDisks:
    """The disk methods of ``guest.Guest``."""

    if typing.TYPE_CHECKING:
        conf: typing.Any
        uuid: str
        lock: threading.RLock

        def execute(self, command: str, **arguments) -> typing.Any: ...

        def _connected(self, command: str) -> qmp.Monitor: ...

    def add_volume_node(self, node: str, path: str, read_only: bool) -> None:
        with self.lock:  # release_files must not close the set first
            self.execute('blockdev-add', **{
                'driver': 'file', 'node-name': node + 'f',
                'filename': confinement.pass_file(self, path, read_only),
                'read-only': read_only,
                'cache': {'direct': self.conf.qemu.direct_io}})
        self.execute('blockdev-add', **{
            'driver': 'raw', 'file': node + 'f', 'node-name': node,
            'read-only': read_only})

    def add_overlay_node(self, node: str, path: str, backing: str | None,
                         read_only: bool = False) -> None:
        with self.lock:
            self.execute('blockdev-add', **{
                'driver': 'file', 'node-name': node + 'f',
                'filename': confinement.pass_file(self, path, read_only),
                'read-only': read_only})
        self.execute('blockdev-add', **{
            'driver': 'qcow2', 'file': node + 'f', 'node-name': node,
            'backing': backing, 'read-only': read_only})

    def delete_nodes(self, *nodes: str) -> None:
        """Delete format nodes and their file nodes, top first."""
        for node in nodes:
            self.execute('blockdev-del', **{'node-name': node})
            self.execute('blockdev-del', **{'node-name': node + 'f'})
        confinement.release_files(self)

    def node_size(self, node: str) -> int:
        for info in self.execute('query-named-block-nodes', flat=True):
            if info['node-name'] == node:
                return info['image']['virtual-size']
        raise exception.DriverError(action='find block node %s' % node,
                                    reason='guest %s has no such node'
                                    % self.uuid)

    def plug(self, disk: dict) -> None:
        """Open a disk's nodes and hot-plug its device.

        All or nothing: a refusal leaves no node, device or export, so
        the slot and its node names can be used again.
        """
        names = node_names(disk)
        read_only = disk['attach_mode'] == 'ro'
        self.add_volume_node(names['base'], disk['path'], read_only)
        try:
            self._plug_device(disk, names, read_only)
        except Exception:
            self._unplug_quietly(disk)
            raise

    def _unplug_quietly(self, disk: dict) -> None:
        names = node_names(disk)
        for command, arguments in (
                ('block-export-del', {'id': names['export'],
                                      'mode': 'hard'}),
                ('device_del', {'id': names['device']}),
                ('blockdev-del', {'node-name': names.get('overlay')}),
                ('blockdev-del', {'node-name': names.get('overlay_file')}),
                ('blockdev-del', {'node-name': names['base']}),
                ('blockdev-del', {'node-name': names['base_file']})):
            if None in arguments.values():
                continue
            with contextlib.suppress(exception.MonitorError):
                self.execute(command, **arguments)
        with contextlib.suppress(exception.MonitorError):
            confinement.release_files(self)

    def _plug_device(self, disk: dict, names: dict, read_only: bool) -> None:
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
        device = {'driver': 'virtio-blk-pci', 'drive': top,
                  'id': names['device'], 'bus': names['port'],
                  'serial': guests.serial(disk['volume_id']),
                  # Writers elsewhere are allowed only on a multiattach
                  # volume; any other volume keeps QEMU's write lock, so
                  # a second open of it fails.
                  'share-rw': bool(disk.get('multiattach')
                                   or self.conf.qemu.export_disks)}
        if disk.get('boot_index') == 0:
            device['bootindex'] = 0
        self.execute('device_add', **device)
        if self.conf.qemu.export_disks:
            self.execute('block-export-add', type='nbd', id=names['export'],
                         name=disk['volume_id'], writable=not read_only,
                         **{'node-name': top})

    def unplug(self, disk: dict) -> None:
        """Unplug the device, wait until the guest released it, close it.

        A guest that does not release it within ``[qemu] detach_timeout``
        keeps the disk, and this raises.
        """
        names = node_names(disk)
        if self.conf.qemu.export_disks:
            self.execute('block-export-del', id=names['export'], mode='hard')
            # Removal finishes once its clients are gone.
            while any(export['id'] == names['export']
                      for export in self.execute('query-block-exports')):
                time.sleep(0.01)
        monitor = self._connected('device_del')
        released = True
        with monitor.listening('DEVICE_DELETED') as wait:
            try:
                self.execute('device_del', id=names['device'])
            except exception.MonitorError as exc:
                # Released late, after an earlier detach gave up waiting.
                if 'not found' not in str(exc):
                    raise
            else:
                released = wait(
                    lambda data: data.get('device') == names['device'],
                    self.conf.qemu.detach_timeout)
            if not released:
                raise exception.DriverError(
                    action='detach volume %s' % disk['volume_id'],
                    reason='guest %s did not release the disk within %d s '
                    '(PCIe hot-unplug); it still has it'
                    % (self.uuid, self.conf.qemu.detach_timeout))
        nodes = [names['base']]
        if disk.get('overlay'):
            nodes.insert(0, names['overlay'])
        self.delete_nodes(*nodes)

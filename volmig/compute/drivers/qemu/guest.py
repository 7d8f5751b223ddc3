"""One guest: a QEMU process, its monitor, and its disks on record.

A guest lives in its own directory under the agent's state path: the QMP
socket, the pid file, QEMU's log, the serial console's log, overlays, and
``guest.json``, which records each disk's file, mode and block-node
names. QEMU is started with ``-daemonize``, so it is no child of the
agent and outlives a restart; the agent finds it again from the pid file
and reconnects.

QEMU starts paused; its disks are plugged over QMP, the same way as a
later attach, then the machine is reset, so that the firmware finds the
boot disk, and its CPUs run. Disks sit in PCIe root ports with
native hot-plug: a guest OS releases a disk on unplug (pciehp), and a
slot no OS ever powered on is emptied at once.
"""

import contextlib
import os
import signal
import subprocess  # nosec B404
import time

from oslo_log import log as logging

from volmig import exception
from volmig.compute.drivers import guests
from volmig.compute.drivers.qemu import confinement
from volmig.compute.drivers.qemu import disks
from volmig.compute.drivers.qemu import monitor as qmp

LOG = logging.getLogger(__name__)


class Guest(guests.GuestRecord, disks.GuestDisks):

    def __init__(self, conf, directory: str, uuid: str,
                 loop: qmp.EventLoop, on_event=None):
        super().__init__(directory, uuid, {'uuid': uuid, 'disks': {}})
        self.conf = conf
        self._loop = loop
        self._on_event = on_event
        self._monitor: qmp.Monitor | None = None
        # QEMU is a child of the agent that started it: reaped here.
        self._process: subprocess.Popen | None = None

    @property
    def nbd_socket(self) -> str:
        return self.path('nbd.sock')

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
        if self._process is not None and self._process.poll() is not None:
            self._process = None
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

    def _command(self) -> list[str]:
        command = [
            self.conf.qemu.binary, '-name', 'guest=%s' % self.uuid,
            '-uuid', self.uuid, '-machine', 'q35',
            '-accel', guests.accelerator(self.conf), '-S', '-nodefaults',
            '-no-user-config', '-sandbox', confinement.SANDBOX,
            '-m', str(self.conf.qemu.memory_mb), '-display', 'none',
            # Native PCIe hot-plug instead of ACPI: see the module doc.
            '-global', 'ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off']
        for slot in range(self.conf.qemu.max_disks):
            command += ['-device', 'pcie-root-port,id=rp%d,chassis=%d'
                        % (slot, slot + 1)]
        return command

    def launch(self, image: dict | None = None) -> None:
        """Start QEMU with the disks on record, then run its CPUs."""
        os.makedirs(self.directory, exist_ok=True)
        process = confinement.start(self, self._command(), image,
                                    self.record.get('uid'))
        self._process = process
        try:
            self.connect()
        except exception.MonitorError as exc:
            if process.poll() is None:
                raise exception.DriverError(
                    action='start guest %s' % self.uuid,
                    reason='its QMP monitor did not answer: %s' % exc)
            raise exception.DriverError(action='start guest %s' % self.uuid,
                                        reason=confinement.failure(self))
        if self.conf.qemu.export_disks:
            # Bound by the agent, like the other sockets: QEMU may create
            # no file.
            nbd = confinement.listening(self.nbd_socket)
            try:
                self.execute('getfd', fd=nbd.fileno(), fdname='nbd')
            finally:
                nbd.close()
            self.execute('nbd-server-start', addr={
                'type': 'fd', 'data': {'str': 'nbd'}})
        for disk in sorted(self.disks.values(),
                           key=lambda disk: disk['slot']):
            self.plug(disk)
        # A slot filled by hot-plug stays powered off until an OS powers
        # it on, so the firmware would not see the boot disk; a reset
        # powers every filled slot, as at a cold boot.
        self.execute('system_reset')
        self.execute('cont')

    def connect(self) -> None:
        self.disconnect()
        self._monitor = qmp.Monitor(self._loop, self.path('qmp.sock'),
                                    self.uuid, self.conf.qemu.qmp_timeout)
        self._monitor.connect(self._on_event)

    def disconnect(self) -> None:
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None

    def gone_within(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._pid() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self._pid() is None

    def power_down(self, timeout: float) -> None:
        """A clean shutdown: ACPI power-down, then hard after ``timeout``."""
        if self._pid() is None:
            self.disconnect()
            return
        with contextlib.suppress(exception.MonitorError, OSError,
                                 EOFError, exception.DriverError):
            self.execute('system_powerdown')
            if self.gone_within(timeout):
                self.disconnect()
                return
            LOG.warning('Guest %s did not shut down within %d s of an ACPI '
                        'power-down; stopping it', self.uuid, timeout)
        self.shutdown()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop QEMU at once, as pulling the plug."""
        pid = self._pid()
        if pid is None:
            self.disconnect()
            return
        with contextlib.suppress(exception.MonitorError, OSError,
                                 EOFError, exception.DriverError):
            self.execute('quit')
        self.disconnect()
        if not self.gone_within(timeout):
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

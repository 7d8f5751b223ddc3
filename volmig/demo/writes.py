"""What volmig-guest's writer acknowledged, and whether a disk holds it.

volmig-guest (``tools/build-guest-image.sh``) writes self-describing 4 KiB
blocks, ``SEQ<12 digits>|`` 256 times, at block ``region * slots + seq %
slots`` of each writable disk, and prints ``ACK <serial> <seq>`` on its
serial console once the block is on the disk (``oflag=direct
conv=fsync``). After a clean stop each slot must hold the block of the
highest sequence number acknowledged for it, or zeros if none was.

``ConsoleReader`` reads every line of a guest's console as it comes, and
stamps it with the host's clock, so gaps in the acknowledgements can be
set against the host's own events. It holds the qemu driver's console
socket (a connected client that does not read stalls the guest's UART),
or follows the log file that libvirt writes the console to.
"""

import os
import re
import socket
import stat
import threading
import time

BLOCK = 4096
SLOTS = 256
_ACK = re.compile(r'^ACK (\S+) (\d+)\s*$')
# Seconds between looks at a console log file for new lines: well under
# the 12-25 ms between the writer's acknowledgements.
FOLLOW_INTERVAL = 0.002


def block(seq: int) -> bytes:
    return (b'SEQ%012d|' % seq) * (BLOCK // 16)


def acknowledged(console: str, serial: str) -> list[int]:
    """The sequence numbers acknowledged for the disk ``serial``."""
    acks = []
    for line in console.splitlines():
        match = _ACK.match(line.strip())
        if match and match.group(1) == serial:
            acks.append(int(match.group(2)))
    return acks


def mismatches(path: str, acks: list[int], slots: int = SLOTS,
               region: int = 0, clean: bool = True) -> list[str]:
    """Slots of the disk file at ``path`` that do not hold what the
    acknowledgements say; empty when the disk is right.

    After an abrupt stop (``clean=False``) a slot may also hold a newer
    well-formed block: its acknowledgement was still in the guest.
    """
    newest: dict[int, int] = {}
    for seq in acks:
        newest[seq % slots] = max(seq, newest.get(seq % slots, 0))
    wrong = []
    with open(path, 'rb') as disk:
        disk.seek(region * slots * BLOCK)
        for slot in range(slots):
            found = disk.read(BLOCK)
            want = newest.get(slot)
            if found == (block(want) if want else bytes(BLOCK)):
                continue
            if not clean and _newer_block(found, slot, slots, want or 0):
                continue
            wrong.append('slot %d: want %s, found %r' % (
                slot, 'seq %d' % want if want else 'zeros', found[:16]))
    return wrong


def _newer_block(found: bytes, slot: int, slots: int, than: int) -> bool:
    match = re.match(rb'SEQ(\d{12})\|', found)
    if not match:
        return False
    seq = int(match.group(1))
    return seq > than and seq % slots == slot and found == block(seq)


def console_of(guest_dir: str) -> str:
    """Where to read a guest's console: its log file, on either driver.

    Not the qemu driver's socket: a client that falls behind makes QEMU's
    UART retry a byte, and QEMU logs a retried byte again, which turned
    ``ACK ... 237`` into ``ACK ... 2237`` under load. Only a reader that
    sends lines to the guest holds the socket.
    """
    return os.path.join(guest_dir, 'console.log')


class ConsoleReader(threading.Thread):
    """Reads a guest's serial console, its socket or its log file,
    stamping each line."""

    def __init__(self, path: str, timeout: float = 60):
        super().__init__(daemon=True)
        deadline = time.monotonic() + timeout
        self._socket: socket.socket | None = None
        self._file = None
        self._closed = threading.Event()
        while True:
            try:
                if stat.S_ISSOCK(os.stat(path).st_mode):
                    self._socket = socket.socket(socket.AF_UNIX,
                                                 socket.SOCK_STREAM)
                    self._socket.connect(path)
                else:
                    # From its end: what came before has no time to stamp.
                    self._file = open(path, 'rb')  # noqa: SIM115
                    self._file.seek(0, os.SEEK_END)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if self._socket is not None:
                    self._socket.close()
                    self._socket = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # (host monotonic time, line)
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()

    def _read(self) -> bytes:
        """What came next; empty once the console is closed."""
        if self._socket is not None:
            try:
                return self._socket.recv(65536)
            except OSError:
                return b''
        if self._file is None:
            return b''  # neither a socket nor a file: nothing to read
        while True:
            data = self._file.read(65536)
            # Once closed, what the file holds still counts.
            if data or self._closed.is_set():
                return data
            time.sleep(FOLLOW_INTERVAL)

    def run(self):
        pending = b''
        while True:
            data = self._read()
            now = time.monotonic()
            if not data:
                break
            pending += data
            *complete, pending = pending.split(b'\n')
            with self._changed:
                self.lines += [(now, line.decode('utf-8', 'replace')
                                .rstrip('\r')) for line in complete]
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def send(self, line: str) -> None:
        """A line to the guest: only through a console socket."""
        if self._socket is None:
            raise ValueError('a console log file takes no input')
        self._socket.sendall(line.encode() + b'\n')

    def wait_for(self, pattern: str, timeout: float) -> str:
        """The first line matching ``pattern``; raises on timeout."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for _, line in self.lines:
                    if regex.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or not self.is_alive():
                    raise TimeoutError('no console line matching %r'
                                       % pattern)
                self._changed.wait(left)

    def ack_times(self, serial: str) -> list[float]:
        with self._changed:
            return [at for at, line in self.lines
                    if acknowledged(line, serial)]

    def gaps(self, serial: str, began: float, ended: float) -> list[float]:
        """The waits between acknowledgements that touch [began, ended],
        in ms: the guest's write latency as it lived it."""
        times = self.ack_times(serial)
        return [(after - before) * 1000
                for before, after in zip(times, times[1:], strict=False)
                if after >= began and before <= ended]

    def longest_gap(self, serial: str, began: float,
                    ended: float) -> float:
        """The longest wait that touches [began, ended], in ms: the pause
        as the guest lived it."""
        return max(self.gaps(serial, began, ended), default=0.0)

    def median_gap(self, serial: str) -> float:
        gaps = self.gaps(serial, float('-inf'), float('inf'))
        return spread(gaps)[0] if gaps else 0.0

    def text(self) -> str:
        with self._changed:
            return '\n'.join(line for _, line in self.lines)

    def close(self) -> None:
        self._closed.set()
        if self._socket is not None:
            self._socket.close()
        self.join(timeout=5)
        if self._file is not None:
            self._file.close()


def spread(gaps: list[float]) -> tuple[float, float, float]:
    """p50, p99 and the longest of ``gaps``; NaN for none."""
    if not gaps:
        return (float('nan'),) * 3
    ordered = sorted(gaps)
    return (ordered[len(ordered) // 2],
            ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            ordered[-1])

"""Simulated guest writes, for tests, the demo and the benchmarks.

No guest OS runs, so a ``qemu-io`` process writes through the NBD export
of a disk (``[qemu] export_disks``). The export sits on the same block
nodes as the guest's device and follows them through snapshot, switch
and commit. Writes through HMP ``qemu-io`` instead made QEMU 7.2 abort
during ``job-complete`` (doc/source/design.rst, "Compute drivers").
Every write is recorded, so
the image the volume must end up with can be computed.

A write is acknowledged once QEMU has written it; with ``[qemu]
direct_io`` (the default) it is then in the file, so the file can be
read and compared as soon as the writes stop.
"""

import os
import subprocess  # nosec B404
import threading
import time


def nbd_socket(compute_state_path: str, instance_uuid: str) -> str:
    """Where an agent with that state path exports a guest's disks."""
    return os.path.join(compute_state_path, 'guests', instance_uuid,
                        'nbd.sock')


_PROMPT = 'qemu-io> '


class WriteFailed(IOError):
    pass


class GuestWriter:

    def __init__(self, socket_path: str, volume_id: str,
                 qemu_io: str = 'qemu-io'):
        uri = 'nbd+unix:///%s?socket=%s' % (volume_id, socket_path)
        self._process = subprocess.Popen(  # nosec B603
            [qemu_io, '-f', 'raw', uri], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            bufsize=1)
        # Whether the prompt printed after the last command is unread.
        self._prompt_unread = True
        # (pattern, offset, length, completed at, latency in ms)
        self.writes: list[tuple[int, int, int, float, float]] = []

    def _command(self, line: str) -> str:
        assert self._process.stdin and self._process.stdout  # nosec B101
        self._process.stdin.write(line + '\n')
        self._process.stdin.flush()
        reply = self._process.stdout.readline()
        if not reply:
            raise WriteFailed('qemu-io exited: %s' % line)
        return reply.replace(_PROMPT, '').strip()

    def write(self, pattern: int, offset: int, length: int) -> float:
        """Write ``length`` bytes of ``pattern``; returns the latency, ms."""
        began = time.perf_counter()
        reply = self._command('write -P %d %d %d' % (pattern, offset,
                                                     length))
        if not reply.startswith('wrote '):
            raise WriteFailed(reply)
        # The statistics line that follows each write.
        self._process.stdout.readline()  # type: ignore[union-attr]
        self._prompt_unread = True
        now = time.perf_counter()
        latency = (now - began) * 1000
        self.writes.append((pattern, offset, length, now, latency))
        return latency

    def flush(self) -> None:
        """Make the writes so far durable, as a guest's fsync does."""
        assert self._process.stdin and self._process.stdout  # nosec B101
        self._process.stdin.write('flush\n')
        self._process.stdin.flush()
        # A good flush prints nothing but the next prompt (after the one
        # a write leaves unread); anything else is its error.
        prompts = _PROMPT * (2 if self._prompt_unread else 1)
        reply = self._process.stdout.read(len(prompts))
        self._prompt_unread = False
        if reply != prompts:
            raise WriteFailed('flush: %s' % reply)

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin  # nosec B101
            self._process.stdin.close()
            self._process.wait(timeout=30)
        assert self._process.stdout  # nosec B101
        self._process.stdout.close()

    def expected_image(self, base: bytes) -> bytes:
        """``base`` with every recorded write applied in order."""
        image = bytearray(base)
        for pattern, offset, length, _, _ in self.writes:
            image[offset:offset + length] = bytes([pattern]) * length
        return bytes(image)

    def max_latency_between(self, began: float, ended: float) -> float:
        """The slowest write that finished in [began, ended], in ms."""
        return max((latency for _, _, _, at, latency in self.writes
                    if began <= at <= ended), default=0.0)


class WriteLoad(threading.Thread):
    """Steady guest writes of 64 KiB across the disk, until stopped."""

    BLOCK = 65536

    def __init__(self, writer: GuestWriter, size: int):
        super().__init__(daemon=True)
        self.writer = writer
        self.size = size
        self.stopping = threading.Event()
        self.error: Exception | None = None

    def run(self):
        number = 0
        try:
            while not self.stopping.is_set():
                number += 1
                offset = (number * 7919 * self.BLOCK) % self.size
                self.writer.write(number % 250 + 1, offset, self.BLOCK)
        except Exception as exc:
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        self.join()

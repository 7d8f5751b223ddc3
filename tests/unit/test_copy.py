"""The verified copy on real files: holes, zeros, O_DIRECT, the kernel's
copy, and a flipped byte found from the disk."""

import ctypes
import hashlib
import mmap
import os
import subprocess  # nosec B404
import threading

import fixtures
from oslotest import base
import testscenarios

from tests import fixtures as fixtures_mod
from volmig import exception
from volmig.conf import CONF
from volmig.datapath import check
from volmig.datapath import copy
from volmig.datapath import pacing
from volmig.datapath import reading

MIB = 1024 * 1024
# (offset, bytes) written into a 16 MiB src; the rest is holes, and one
# MiB of explicit zeros sits inside a data run.
WRITES = [(0, b'boot' * 1024), (3 * MIB, os.urandom(2 * MIB)),
          (5 * MIB, bytes(MIB)), (6 * MIB, b'\x01' * 4096),
          (16 * MIB - 4096, b'end!' * 1024)]

load_tests = testscenarios.load_tests_apply_scenarios
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)


def opened_direct(path: str) -> set[bool]:
    """For each descriptor of this process open on ``path``, whether it
    was opened with O_DIRECT (its flags in /proc/self/fdinfo)."""
    found = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            if os.readlink('/proc/self/fd/' + fd) != path:
                continue
            with open('/proc/self/fdinfo/' + fd) as info:
                [flags] = [int(line.split()[1], 8) for line in info
                           if line.startswith('flags:')]
        except (FileNotFoundError, ValueError):
            continue
        found.add(bool(flags & os.O_DIRECT))
    return found


def cached_bytes(path: str) -> int:
    """How much of ``path`` is in the page cache now (mincore(2) on a
    read-only map of it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED,
                             fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), 'mmap')
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(ctypes.c_void_p(address), size, vector) != 0:
                raise OSError(ctypes.get_errno(), 'mincore')
        finally:
            _libc.munmap(ctypes.c_void_p(address), size)
    finally:
        os.close(fd)
    return sum(byte & 1 for byte in vector) * mmap.PAGESIZE


class VerifiedCopyTest(base.BaseTestCase):

    # io_size: the largest single I/O ([storage] copy_io_kb); 0, the
    # chunk's.
    # pacing: [storage] copy_pacing, for the checked copies.
    scenarios = [('o_direct', {'offload': False, 'io_size': 0,
                               'pacing': False}),
                 ('kernel', {'offload': True, 'io_size': 0,
                             'pacing': False}),
                 ('o_direct_small_io', {'offload': False,
                                        'io_size': 64 * 1024,
                                        'pacing': False}),
                 ('kernel_small_io', {'offload': True, 'io_size': 64 * 1024,
                                      'pacing': False}),
                 ('o_direct_paced', {'offload': False, 'io_size': 0,
                                     'pacing': True}),
                 ('kernel_paced', {'offload': True, 'io_size': 0,
                                   'pacing': True})]

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.src = os.path.join(tmp, 'src')
        self.dst = os.path.join(tmp, 'dst')
        with open(self.src, 'wb') as src:
            src.truncate(16 * MIB)
            for offset, data in WRITES:
                src.seek(offset)
                src.write(data)
        with open(self.dst, 'wb') as dst:
            dst.truncate(16 * MIB)

    def read(self, path):
        with open(path, 'rb') as handle:
            return handle.read()

    def test_dst_is_src_and_the_digest_is_src_s(self):
        seen = []
        digest = copy.copy(self.src, self.dst, MIB,
                           progress=lambda done, total: seen.append(done),
                           offload=self.offload,
                           io_size=self.io_size)
        content = self.read(self.src)
        self.assertEqual(content, self.read(self.dst))
        self.assertEqual(hashlib.sha256(content).hexdigest(), digest)
        self.assertEqual(digest, reading.sha256_from_disk(self.dst, MIB,
                                                       self.io_size))
        self.assertEqual(16 * MIB, seen[-1])
        self.assertEqual(sorted(seen), seen)

    def test_the_copy_is_idle_class_io_and_restores_the_class(self):
        def io_class():
            return subprocess.run(  # nosec B603 B607
                ['ionice', '-p', str(threading.get_native_id())],
                check=True, capture_output=True, text=True).stdout.strip()

        before = io_class()
        seen = set()
        copy.copy(self.src, self.dst, MIB, offload=self.offload,
                  progress=lambda done, total: seen.add(io_class()),
                  io_size=self.io_size)
        self.assertEqual({'idle'}, seen)
        self.assertEqual(before, io_class())
        self.assertNotEqual('idle', before)

    def test_dst_is_written_direct_or_paced(self):
        """Without offload, dst is open O_DIRECT only; with the kernel's
        copy, at most two chunks of dst are in the page cache at each
        step: written back and dropped as the copy goes, so no guest's
        write on this disk waits behind a volume's dirty pages."""
        seen = []

        def look(done, total):
            seen.append(cached_bytes(self.dst) if self.offload
                        else opened_direct(self.dst))
        copy.copy(self.src, self.dst, MIB, offload=self.offload,
                  progress=look, io_size=self.io_size)
        self.assertTrue(seen)
        if self.offload:
            # Two of its single I/Os at most.
            self.assertLessEqual(max(seen), 2 * (self.io_size or MIB), seen)
        else:
            self.assertEqual([{True}] * len(seen), seen)

    def test_every_pass_over_the_disk_keeps_to_the_cap(self):
        """The copy, the hash of src beside the kernel's copy, and the
        read-back check are each paced by the cap to src's last byte of
        data: a guest on the disk waits behind any pass left unpaced."""
        passes = []

        class Pace(reading.Throttle):
            def __init__(self, rate):
                super().__init__(rate)
                self.reached = 0
                passes.append(self)

            def __call__(self, done):
                # Recorded, not slept: the pace, not the clock, is tested.
                self.reached = max(self.reached, done)

        self.useFixture(fixtures.MockPatchObject(reading, 'Throttle', Pace))
        share = pacing.Share(3 * MIB)
        copy.copy(self.src, self.dst, MIB, share, offload=self.offload,
                  io_size=self.io_size)
        reading.sha256_from_disk(self.dst, MIB, self.io_size,
                                 share.throttle())
        # The kernel's copy, and src hashed beside it; else one pass.
        self.assertEqual([(3 * MIB, 16 * MIB)] * (3 if self.offload else 2),
                         [(pace.rate, pace.reached) for pace in passes])

    def test_holes_stay_holes(self):
        copy.copy(self.src, self.dst, MIB, offload=self.offload,
                  io_size=self.io_size)
        allocated = os.stat(self.dst).st_blocks * 512
        # The data runs are about 3.1 MiB; src's 11 MiB of holes (and,
        # without offload, its MiB of zeros) are not written.
        self.assertLess(allocated, 5 * MIB)
        fd = os.open(self.dst, os.O_RDONLY)
        self.addCleanup(os.close, fd)
        self.assertEqual(16 * MIB - 4096, os.lseek(fd, 8 * MIB,
                                                   os.SEEK_DATA))

    def test_a_flipped_byte_in_dst_is_found_from_the_disk(self):
        digest = copy.copy(self.src, self.dst, MIB, offload=self.offload,
                           io_size=self.io_size)
        fd = os.open(self.dst, os.O_RDWR)
        try:
            os.pwrite(fd, bytes([os.pread(fd, 1, 3 * MIB + 7)[0] ^ 1]),
                      3 * MIB + 7)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.assertNotEqual(digest, reading.sha256_from_disk(self.dst, MIB))

    def conf(self):
        fixture = self.useFixture(fixtures_mod.ConfFixture())
        fixture.conf(copy_chunk_kb=1024, copy_io_kb=self.io_size // 1024,
                     copy_offload=self.offload, copy_pacing=self.pacing,
                     group='storage')
        return CONF

    def checked_copy(self, progress=None):
        return copy.checked_copy(self.src, self.dst, self.conf(), 'vol-1',
                                 progress=progress)

    def test_dst_is_read_back_behind_the_copy_and_only_what_it_settled(self):
        """The check reads dst from the disk while the copy goes on, and
        never a byte the copy has not put there yet."""
        settled = []
        dst_reads = []   # (end of the read, how far dst was settled)
        read_behind = threading.Event()

        held = []

        class Recorded(check.Behind):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                settled.append(self)

            def data(self, offset, data):
                super().data(offset, data)
                held.append(len(self._chunks))

        real_preadv = os.preadv

        def preadv(fd, buffers, offset):
            if os.readlink('/proc/self/fd/%d' % fd) == self.dst:
                dst_reads.append((offset + sum(map(len, buffers)),
                                  settled[0]._at))
                read_behind.set()
            return real_preadv(fd, buffers, offset)

        def progress(done, total):
            # Once a first piece is settled, the copy waits for the check
            # to read it, so the two run side by side in every run.
            if settled[0]._at and done < total:
                self.assertTrue(read_behind.wait(10))

        self.useFixture(fixtures.MockPatchObject(check, 'Behind',
                                                 Recorded))
        self.useFixture(fixtures.MockPatch('os.preadv', preadv))
        digest = self.checked_copy(progress)
        content = self.read(self.src)
        self.assertEqual(content, self.read(self.dst))
        self.assertEqual(hashlib.sha256(content).hexdigest(), digest)
        self.assertTrue(dst_reads)
        self.assertLess(dst_reads[0][1], 16 * MIB)
        self.assertEqual([], [(end, at) for end, at in dst_reads
                              if end > at])
        # src is held for the check a few chunks at most.
        self.assertTrue(held)
        self.assertLessEqual(max(held), check.HELD)

    def test_a_failed_copy_ends_with_its_own_error_not_a_waiting_check(self):
        """The hash beside the copy and the check behind it stop when
        the copy fails (a stopped migration), instead of waiting for a
        chunk that never comes."""
        def progress(done, total):
            raise RuntimeError('stopped at %d' % done)

        conf, raised = self.conf(), []

        def run():
            try:
                copy.checked_copy(self.src, self.dst, conf, 'vol-1',
                                  progress=progress)
            except RuntimeError as exc:
                raised.append(str(exc))
        # On a thread, so that a check left waiting fails the test rather
        # than hang it.
        running = threading.Thread(target=run, daemon=True)
        running.start()
        running.join(60)
        self.assertFalse(running.is_alive(), 'the check still waits')
        self.assertEqual(1, len(raised))
        self.assertIn('stopped at', raised[0])

    def test_a_byte_the_disk_holds_wrong_is_found_behind_the_copy(self):
        # Each call that writes dst, and where its dst descriptor is.
        real = {'pwritev': (os.pwritev, 0),
                'copy_file_range': (os.copy_file_range, 1)}
        wrong = 3 * MIB + 7

        def flip(name):
            call, dst_fd = real[name]

            def write(*args):
                done = call(*args)
                offset = args[-1]
                if (os.readlink('/proc/self/fd/%d' % args[dst_fd])
                        == self.dst
                        and offset <= wrong < offset + MIB):
                    with open(self.dst, 'r+b') as dst:
                        dst.seek(wrong)
                        byte = dst.read(1)[0] ^ 1
                        dst.seek(wrong)
                        dst.write(bytes([byte]))
                return done
            return write

        for name in real:
            self.useFixture(fixtures.MockPatch('os.' + name, flip(name)))
        error = self.assertRaises(exception.CopyMismatch,
                                  self.checked_copy)
        self.assertIn('vol-1 differs from its source (at byte %d)' % wrong,
                      str(error))

    def test_a_piece_the_copy_left_out_is_found_where_it_begins(self):
        """A write that never reached dst leaves a hole where src has
        data: the check compares it with src, not with a digest."""
        left_out = 6 * MIB
        real = {'pwritev': os.pwritev,
                'copy_file_range': os.copy_file_range}

        def skip(name):
            def write(*args):
                if args[-1] == left_out:
                    # As if written: what the check must not believe.
                    return (sum(map(len, args[1])) if name == 'pwritev'
                            else args[2])
                return real[name](*args)
            return write

        for name in real:
            self.useFixture(fixtures.MockPatch('os.' + name, skip(name)))
        error = self.assertRaises(exception.CopyMismatch,
                                  self.checked_copy)
        self.assertIn('(at byte %d)' % left_out, str(error))

    def test_dst_data_where_src_is_a_hole_is_found(self):
        """dst is meant to be new, all zeros; a byte it held before the
        copy, where src has a hole, is found all the same."""
        stale = 10 * MIB + 5
        with open(self.dst, 'r+b') as dst:
            dst.seek(stale)
            dst.write(b'!')
        error = self.assertRaises(exception.CopyMismatch,
                                  self.checked_copy)
        self.assertIn('(at byte %d)' % stale, str(error))

    def test_a_holey_src_hashes_as_its_zeros(self):
        empty = self.src + '.empty'
        with open(empty, 'wb') as handle:
            handle.truncate(4 * MIB)
        self.assertEqual(hashlib.sha256(bytes(4 * MIB)).hexdigest(),
                         reading.sha256_from_disk(empty, MIB))

"""Records the series that ``tests/unit/test_pacing.py`` plays back:
``python -m tests.pacing_recorder DIR`` (as root, DIR on a block device).

Every ``pacing.PROBE_INTERVAL``, one probe read of a 2 GiB volume of
random data in DIR and the flushes its disk completed since the probe
before, as the pace sees them, in four scenes: an unpaced checked copy
of the volume alone on the disk (``alone``); the same copy beside a
writer that acknowledges 4 KiB O_DIRECT writes with fdatasync as fast as
it can, as volmig-guest's writer does (``guest``); beside one that does
so five times a second, as a database's commits of volmig's records do
in a drain (``records``); and the first writer alone (``idle``). Each
probe is ``[ms, flushes, seconds since the scene began]``.
"""

import contextlib
import json
import os
import subprocess  # nosec B404
import sys
import threading
import time

from volmig import conf as volmig_conf
from volmig.conf import CONF
from volmig.datapath import copy
from volmig.datapath import flushes
from volmig.datapath import pacing

WRITER = '''
import mmap, os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
os.posix_fallocate(fd, 0, 64 << 20)
block = mmap.mmap(-1, 4096)
block.write(os.urandom(4096))
while True:
    os.pwritev(fd, [block], random.randrange(16384) * 4096)
    os.fdatasync(fd)
    time.sleep(float(sys.argv[2]))
'''


def record(path: str, busy) -> list[list[float]]:
    probe = pacing.Probe(path)
    watch = flushes.Flushes(os.stat(path).st_dev)
    found = []
    began = time.monotonic()
    last = watch.count()
    while busy():
        latency = probe.read()
        count = watch.count()
        found.append([round(latency * 1000, 3), count - last,
                      round(time.monotonic() - began, 4)])
        last = count
        time.sleep(pacing.PROBE_INTERVAL)
    probe.close()
    return found


def copying(src: str, dst: str) -> list[list[float]]:
    subprocess.run(['sh', '-c', 'sync; echo 3 > /proc/sys/vm/drop_caches'],
                   check=True)  # nosec B603 B607
    with open(dst, 'wb') as handle:
        handle.truncate(os.stat(src).st_size)
    copier = threading.Thread(target=copy.checked_copy,
                              args=(src, dst, CONF, 'recorded'))
    copier.start()
    try:
        return record(src, copier.is_alive)
    finally:
        copier.join()
        os.unlink(dst)


def main() -> None:
    where = sys.argv[1]
    volmig_conf.register_opts(CONF)
    CONF([], project='volmig')
    CONF.set_override('copy_pacing', False, group='storage')
    src, dst = os.path.join(where, 'src'), os.path.join(where, 'dst')
    subprocess.run(['dd', 'if=/dev/urandom', 'of=' + src, 'bs=4M',
                    'count=512', 'status=none'], check=True)  # nosec
    scenes = {'alone': copying(src, dst)}
    with writing(where, 0.2):
        scenes['records'] = copying(src, dst)
    with writing(where, 0):
        scenes['guest'] = copying(src, dst)
        ends = time.monotonic() + 4
        scenes['idle'] = record(src, lambda: time.monotonic() < ends)
    json.dump(scenes, sys.stdout)


@contextlib.contextmanager
def writing(where: str, pause: float):
    writer = subprocess.Popen(  # nosec B603
        [sys.executable, '-c', WRITER, os.path.join(where, 'guest'),
         str(pause)])
    try:
        time.sleep(1)
        yield
    finally:
        writer.kill()
        writer.wait()


if __name__ == '__main__':
    main()

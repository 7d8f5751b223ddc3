"""libvirtd for the tests: the host's own daemon, started by hand where
no init system runs it (a container, CI)."""

import fcntl
import os
import shutil
import signal
import subprocess  # nosec B404
import time

import fixtures

URI = 'qemu:///system'
PID_FILE = '/run/libvirtd.pid'
# Held shared by every test on libvirtd, exclusive by one that kills it:
# the kill would otherwise reach the other workers' tests on the same
# daemon (CI saw a migration refused there: "Connection refused").
LOCK_FILE = '/run/volmig-tests-libvirtd.lock'


def unavailable() -> str | None:
    """Why the libvirt driver cannot run here, or None."""
    try:
        import libvirt  # noqa: F401
    except ImportError:
        return 'libvirt-python is not installed (tools/bootstrap.sh)'
    if shutil.which('libvirtd') is None:
        return 'libvirtd is not installed (tools/bootstrap.sh)'
    if os.geteuid() != 0:
        return 'the system libvirtd needs root'
    return None


def answers() -> bool:
    import libvirt
    try:
        libvirt.open(URI).close()
    except libvirt.libvirtError:
        return False
    return True


def start() -> None:
    """virtlogd and libvirtd running, as systemd would have them; each
    daemon refuses to start twice."""
    if answers():
        return
    for daemon in ('virtlogd', 'libvirtd'):
        # Not captured: the daemon would hold the pipes open. One that
        # runs already refuses to start again, which is fine.
        subprocess.run([daemon, '--daemon'], check=False,  # nosec
                       timeout=60, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not answers():
        if time.monotonic() > deadline:
            raise RuntimeError('libvirtd did not answer on %s' % URI)
        time.sleep(0.2)


def kill() -> None:
    """SIGKILL libvirtd, as a crash would; its guests run on."""
    with open(PID_FILE) as pid_file:
        pid = int(pid_file.read())
    os.kill(pid, signal.SIGKILL)
    while os.path.exists('/proc/%d' % pid):
        time.sleep(0.01)


class Libvirtd(fixtures.Fixture):
    """virtlogd and libvirtd running, as systemd would have them, and
    this test alone on them if it ``kills`` libvirtd."""

    def __init__(self, kills: bool = False):
        super().__init__()
        self.kills = kills

    def _setUp(self):
        lock = open(LOCK_FILE, 'a')
        self.addCleanup(lock.close)
        fcntl.flock(lock, fcntl.LOCK_EX if self.kills else fcntl.LOCK_SH)
        self.addCleanup(fcntl.flock, lock, fcntl.LOCK_UN)
        start()

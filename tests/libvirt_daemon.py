"""libvirtd for the tests: the host's own daemon, started by hand where
no init system runs it (a container, CI)."""

import os
import shutil
import subprocess  # nosec B404
import time

import fixtures

URI = 'qemu:///system'


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


def _answers() -> bool:
    import libvirt
    try:
        libvirt.open(URI).close()
    except libvirt.libvirtError:
        return False
    return True


class Libvirtd(fixtures.Fixture):
    """virtlogd and libvirtd running, as systemd would have them."""

    def _setUp(self):
        if _answers():
            return
        for daemon in ('virtlogd', 'libvirtd'):
            subprocess.run([daemon, '--daemon'], check=True,  # nosec
                           timeout=60)
        deadline = time.monotonic() + 60
        while not _answers():
            if time.monotonic() > deadline:
                raise RuntimeError('libvirtd did not answer on %s' % URI)
            time.sleep(0.2)

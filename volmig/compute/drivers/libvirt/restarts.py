"""Migration steps that a restart of libvirtd cuts short.

libvirtd may go away at any moment (a crash, a package upgrade, an
operator's restart) while QEMU and its block jobs run on. A step whose
libvirt call fails because of it is taken again, whole, once a new
libvirtd answers: each step reads where the disk is from libvirt first
(the live XML, the block jobs), so taking it again picks up what the
first attempt did. A step that fails with libvirtd there all along
failed for real, and raises at once.
"""

import functools
import time

import libvirt
from oslo_log import log as logging

from volmig import exception

LOG = logging.getLogger(__name__)

# Seconds between looks for a new libvirtd.
POLL_INTERVAL = 0.5


def went_away(driver, connections: int) -> bool:
    """Whether a call made on the driver's connection number
    ``connections`` failed because libvirtd went away: it does not
    answer now, or it answers on a newer connection."""
    return not driver.answers() or driver.connections != connections


def _back(driver, deadline: float) -> bool:
    """Wait for libvirtd to answer; whether it did by ``deadline``."""
    while time.monotonic() < deadline:
        if driver.answers():
            return True
        time.sleep(POLL_INTERVAL)
    return False


def taken_again(step):
    """Take the driver step ``step`` again once a new libvirtd answers,
    for up to ``[libvirt] reconnect_timeout`` seconds."""
    @functools.wraps(step)
    def again(driver, *args, **kwargs):
        deadline = time.monotonic() + driver.conf.libvirt.reconnect_timeout
        while True:
            connections = driver.connections
            try:
                return step(driver, *args, **kwargs)
            except (libvirt.libvirtError, exception.DriverError):
                if not went_away(driver, connections):
                    raise
                LOG.warning('%s: libvirtd went away; taking the step '
                            'again once a new libvirtd answers',
                            step.__name__)
                if not _back(driver, deadline):
                    raise
    return again

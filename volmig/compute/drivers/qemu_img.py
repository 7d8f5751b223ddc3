"""qemu-img, which both drivers run on volume and overlay files."""

import subprocess  # nosec B404

from volmig import exception
from volmig.compute.drivers.qemu import confinement


def run(conf, *args: str) -> None:
    result = subprocess.run(  # nosec B603
        [conf.qemu.img_binary, *args], capture_output=True, text=True,
        check=False, env=confinement.ENVIRONMENT)
    if result.returncode:
        raise exception.DriverError(action='run qemu-img %s' % args[0],
                                    reason=result.stderr.strip())

"""volmig-guest in tests: its images registered, its console read.

The image is what ``tools/build-guest-image.sh`` builds (``.ci/run`` and
``tools/bootstrap.sh`` run it). ``volmig-guest-r1`` is the same guest
writing to region 1 of its disks, so two guests can share a volume
read/write without writing over each other.
"""

import os

from volmig.compute.drivers.qemu import images

BUILD = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'build',
                     'guest-image')
IMAGES = {'volmig-guest': '', 'volmig-guest-r1': ' VOLMIG_REGION=1'}


def _built(name: str) -> str:
    path = os.path.join(BUILD, name)
    if not os.path.exists(path):
        raise RuntimeError('volmig-guest is not built: run '
                           'tools/build-guest-image.sh')
    return path


def disk() -> str:
    """volmig-guest on a disk the firmware boots (syslinux)."""
    return _built('disk.raw')


def register(image_dir: str) -> None:
    _built('vmlinuz')
    with open(os.path.join(BUILD, 'cmdline')) as handle:
        cmdline = handle.read().strip()
    store = images.ImageStore(image_dir)
    for name, extra in IMAGES.items():
        store.register(name, kernel=os.path.join(BUILD, 'vmlinuz'),
                       initrd=os.path.join(BUILD, 'initrd.gz'),
                       cmdline=cmdline + extra,
                       disk=os.path.join(BUILD, 'disk.raw'))

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


def register(image_dir: str) -> None:
    if not os.path.exists(os.path.join(BUILD, 'vmlinuz')):
        raise RuntimeError('volmig-guest is not built: run '
                           'tools/build-guest-image.sh')
    with open(os.path.join(BUILD, 'cmdline')) as handle:
        cmdline = handle.read().strip()
    store = images.ImageStore(image_dir)
    for name, extra in IMAGES.items():
        store.register(name, kernel=os.path.join(BUILD, 'vmlinuz'),
                       initrd=os.path.join(BUILD, 'initrd.gz'),
                       cmdline=cmdline + extra,
                       disk=os.path.join(BUILD, 'disk.raw'))

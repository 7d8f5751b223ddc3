"""The embedded default: every service in one process.

SQLite and the state live under one directory; the transport is
``fake://`` unless a RabbitMQ URL is given. With the qemu or the libvirt
driver, volmig-volume runs too, with pools ``pool-a`` and ``pool-b`` under the
state directory, and the guest image built by
``tools/build-guest-image.sh`` is registered as ``volmig-guest``. The REST
API uses noauth2. The process holds its own master key for signed RPC,
in the state directory.
"""

import os

from volmig import exception
from volmig import service
from volmig.api import http
from volmig.compute.drivers import images
from volmig.conf import CONF
from volmig.db import api as db_api
from volmig.db import schema
from volmig.signing import keys

POOLS = ('pool-a', 'pool-b')
GUEST_IMAGE = 'volmig-guest'


def configure(state_dir: str, driver: str, transport_url: str) -> None:
    state_dir = os.path.abspath(state_dir)
    os.makedirs(state_dir, exist_ok=True)
    CONF.set_override('state_path', state_dir)
    CONF.set_override('transport_url', transport_url)
    CONF.set_override('auth_strategy', 'noauth2', group='api')
    CONF.set_override('driver', driver, group='compute')
    CONF.set_override('stop_guests_on_exit', True, group='compute')
    if not CONF.signing.key_file:
        # One process, so one holder: the master key, its own.
        key_file = os.path.join(state_dir, 'key.json')
        if not os.path.exists(key_file):
            keys.create(key_file)
        CONF.set_override('key_file', key_file, group='signing')
    if driver != 'fake':
        CONF.set_override('backend', 'file', group='volume')
        if not CONF.storage.pools:
            CONF.set_override('pools', {
                pool: os.path.join(state_dir, 'pools', pool)
                for pool in POOLS}, group='storage')
    db_api.configure(CONF.database.connection)
    schema.upgrade()


def register_guest_image(build_dir: str) -> dict | None:
    """``volmig-guest`` from a build directory, registered once."""
    store = images.ImageStore(CONF.qemu.image_dir)
    try:
        return store.get(GUEST_IMAGE)
    except exception.ImageNotFound:
        pass
    if not os.path.exists(os.path.join(build_dir, 'vmlinuz')):
        return None
    with open(os.path.join(build_dir, 'cmdline')) as cmdline:
        return store.register(
            GUEST_IMAGE, kernel=os.path.join(build_dir, 'vmlinuz'),
            initrd=os.path.join(build_dir, 'initrd.gz'),
            cmdline=cmdline.read().strip(),
            disk=os.path.join(build_dir, 'disk.raw'))


def let_through(state_dir: str) -> None:
    """Let other users through the directories above and under the state
    directory, as a libvirt host needs (README, "Compute drivers"): each
    guest's QEMU runs as a user of its own and opens its files by name.
    Each file keeps its own mode, so nothing becomes readable."""
    state_dir = os.path.abspath(state_dir)
    directories = [state_dir]
    while os.path.dirname(directories[-1]) != directories[-1]:
        directories.append(os.path.dirname(directories[-1]))
    for root, names, _ in os.walk(state_dir):
        directories += [os.path.join(root, name) for name in names]
    for directory in directories:
        mode = os.stat(directory).st_mode
        if not mode & 0o001:
            os.chmod(directory, mode | 0o001)


def compute_hosts(count: int) -> list[str]:
    return ['compute-%d' % number for number in range(1, count + 1)]


def build(computes: int, api: http.HTTPService | None = None,
          on_start=None) -> service.ServiceGroup:
    """The services; ``api`` serves REST once the others are up."""
    members: list = [service.Service(service.CONDUCTOR)]
    if CONF.volume.backend == 'file':
        members.append(service.Service(service.VOLUME))
    members.append(service.Service(service.API))
    members += [service.Service(service.COMPUTE, host=host)
                for host in compute_hosts(computes)]
    if api is not None:
        members.append(api)
    return service.ServiceGroup(members, on_start)

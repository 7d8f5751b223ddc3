"""volmig-demo: a live migration of a volume a running guest writes to.

It runs the embedded default in this process (conductor, volmig-volume,
api and a compute agent with the qemu driver, or with ``--driver
libvirt`` the libvirt driver, on ``fake://`` with SQLite)
and boots ``volmig-guest``, a real Linux guest, with a data volume in
pool-a. The writer inside the guest keeps writing sequence-numbered
blocks, each acknowledged on the serial console once it is on the disk,
while volmig-volume migrates the volume live to pool-b. Then the guest is
shut down cleanly, and every block it acknowledged is checked on pool-b.
It prints the pauses as the agent measured them and as the guest lived
them.
"""

import logging
import sys

from oslo_config import cfg

from volmig import config
from volmig import embedded
from volmig.conf import CONF
from volmig.demo import migration

cli_opts = [
    cfg.StrOpt('state-dir', required=True,
               help='Directory for the database, pools and guests.'),
    cfg.StrOpt('driver', default='qemu', choices=['qemu', 'libvirt'],
               help='Compute driver: QEMU processes of the agent\'s own, '
                    'or libvirt domains (libvirtd must be running).'),
    cfg.IntOpt('size-mb', default=256, min=16,
               help='Size of the volume.'),
    cfg.IntOpt('max-bandwidth-mbps', default=32, min=0,
               help='Copy bandwidth cap (MiB/s), so the copy runs long '
                    'enough to watch; 0 for none.'),
    cfg.StrOpt('guest-image', default='build/guest-image',
               help='Where tools/build-guest-image.sh put volmig-guest.'),
    cfg.BoolOpt('verbose', default=False,
                help='Show the services\' INFO logs too.'),
]


def _libvirt_unreachable() -> str | None:
    """Why the libvirt driver cannot run, said before any service starts."""
    try:
        import libvirt
    except ImportError:
        return ("libvirt-python is not installed: pip install "
                "'volmig[libvirt]'")
    libvirt.registerErrorHandler(lambda *_: None, None)
    try:
        libvirt.open(CONF.libvirt.uri).close()
    except libvirt.libvirtError as exc:
        return ('libvirtd does not answer on %s (%s): start it '
                '(systemctl start libvirtd, or virtlogd -d and libvirtd -d)'
                % (CONF.libvirt.uri, exc.get_error_message()))
    return None


def main() -> None:
    CONF.register_cli_opts(cli_opts)
    config.parse_args(sys.argv[1:])
    if not CONF.verbose:
        logging.getLogger().setLevel(logging.WARNING)
    embedded.configure(CONF.state_dir, CONF.driver, 'fake://')
    if embedded.register_guest_image(CONF.guest_image) is None:
        print('volmig-guest is not built: run tools/build-guest-image.sh',
              file=sys.stderr)
        sys.exit(1)
    if CONF.driver == 'libvirt':
        reason = _libvirt_unreachable()
        if reason:
            print(reason, file=sys.stderr)
            sys.exit(1)
    group = embedded.build(computes=1)
    group.start()
    if CONF.driver == 'libvirt':
        # The pools and the guests' directories exist now.
        embedded.let_through(CONF.state_dir)
    try:
        ok = migration.run(CONF.size_mb, CONF.max_bandwidth_mbps)
    finally:
        group.stop()
    sys.exit(0 if ok else 1)

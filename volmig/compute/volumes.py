"""What block storage hands a host, opened as a path on it.

volmig-volume's ``file`` connection info names the file itself. Anything
else comes from Cinder and is connected through os-brick, as Nova does:
``nfs`` (the file under the share's mount point, mounting the share if
it is not mounted yet) and ``local`` (a path on this host). Other
protocols (``rbd``, ``iscsi``, ...) are refused by name before anything
is connected: each needs a test on a real target, and none runs on the
machines volmig is tested on.
"""

import os

from oslo_log import log as logging
from oslo_utils import netutils

from volmig import exception
from volmig.conf import compute as compute_conf

LOG = logging.getLogger(__name__)

FILE = 'file'
# Cinder's driver_volume_type, and os-brick's name for its connector.
BRICK_PROTOCOLS = {'nfs': 'NFS', 'local': 'LOCAL'}
SUPPORTED = (FILE, *BRICK_PROTOCOLS)
# Those whose data is on a disk of this host.
ON_THIS_HOST = (FILE, 'local')


def _brick():
    # os-brick runs its privileged commands (mount) through privsep. An
    # agent that is root already (it runs QEMU) gains nothing from a
    # helper daemon, so they run in its own process; otherwise privsep
    # starts its helper as [privsep_osbrick] configures it.
    from os_brick import privileged
    from os_brick.initiator import connector
    if os.geteuid() == 0:
        privileged.default.set_client_mode(False)
    return connector


class VolumeConnector:
    """Opens volumes on this host; one per agent."""

    def __init__(self, conf):
        self.conf = conf
        self._connectors: dict = {}

    def properties(self, host: str) -> dict:
        """This host's connector, as Cinder's attachment_update wants it."""
        return _brick().get_connector_properties(
            None, self.conf.compute.my_ip or netutils.get_my_ipv4(),
            multipath=False, enforce_multipath=False, host=host)

    def _connector(self, protocol: str):
        if protocol not in self._connectors:
            self._connectors[protocol] = (
                _brick().InitiatorConnector.factory(
                    BRICK_PROTOCOLS[protocol], None,
                    nfs_mount_point_base=compute_conf.nfs_mount_point_base(
                        self.conf)))
        return self._connectors[protocol]

    def path(self, connection_info: dict) -> str:
        """Connect the volume (again: it is idempotent); its path here."""
        protocol = check_protocol(connection_info)
        if protocol == FILE:
            return connection_info['data']['path']
        try:
            device = self._connector(protocol).connect_volume(
                connection_info['data'])
        except Exception as exc:
            raise exception.DriverError(
                action='connect a %s volume' % protocol,
                reason=exception.safe_message(exc))
        return device['path']


def on_this_host(connection_info: dict) -> bool:
    """Whether the volume's data is on a disk of this host, whose other
    users the copy's pace can watch. An NFS share's is on its server's
    disks, whatever its mount point is here (a directory bind-mounted as
    the share, in tests and benchmarks on one machine)."""
    return check_protocol(connection_info) in ON_THIS_HOST


def check_protocol(connection_info: dict) -> str:
    """The volume's protocol, or a refusal that names it."""
    protocol = (connection_info or {}).get('driver_volume_type')
    if protocol not in SUPPORTED:
        raise exception.VolumeProtocolNotSupported(
            protocol=protocol, supported=', '.join(SUPPORTED))
    return protocol

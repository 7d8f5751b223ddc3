"""Where a Nova server's volume is, as libvirt on this host runs it.

A drain of a Cinder backend checks, after Nova's swap, that the guest
now reads and writes the new backend: Cinder's record moves when Nova
answers, whether or not the guest did. Nova's libvirt domain carries the
server's id as its UUID, and each volume's id as its disk's serial, so
this needs nothing of Nova's. The connection is read-only: the agent
never changes a guest it does not own.
"""

from xml.etree import ElementTree  # nosec B405: libvirtd's own XML

from volmig import exception


def source(uri: str, server_id: str, volume_id: str) -> str | None:
    """The file or device the domain of ``server_id`` has for the
    volume, as it runs (or last ran); None if it has no such disk.
    Refuses a domain that is not on this host, or a libvirtd that cannot
    be reached."""
    try:
        import libvirt
    except ImportError:
        raise exception.DriverError(
            action="read Nova's server %s" % server_id,
            reason='libvirt-python is not installed on this host')
    try:
        connection = libvirt.openReadOnly(uri)
        try:
            guest = connection.lookupByUUIDString(server_id)
            xml = guest.XMLDesc(0)
        finally:
            connection.close()
    except libvirt.libvirtError as exc:
        raise exception.DriverError(
            action="read Nova's server %s" % server_id,
            reason=exc.get_error_message())
    # libvirtd wrote it, escaping whatever a user named (Nova puts the
    # server's name in its metadata): no entity of anyone else's.
    for disk in ElementTree.fromstring(xml).iter('disk'):  # noqa: S314 # nosec B314
        if disk.findtext('serial') == volume_id:
            found = disk.find('source')
            if found is None:
                return None
            return found.get('file') or found.get('dev')
    return None

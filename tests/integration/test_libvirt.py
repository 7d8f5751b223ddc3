"""The real-guest data path on the libvirt driver: volmig-guest as a
libvirt domain, its writer's every acknowledged block checked on the
volume after a live migration, a cancel and a legacy swap. It skips,
saying why, where libvirt is not installed.
"""

import os

from tests import libvirt_daemon
from tests.integration import real_guest_base
from tests.integration import test_real_guests


class LibvirtGuestTestCase(real_guest_base.RealGuestTestCase):
    COMPUTES = 1

    def setUp(self):
        reason = libvirt_daemon.unavailable()
        if reason:
            self.skipTest(reason)
        self.useFixture(libvirt_daemon.Libvirtd())
        super().setUp()
        # Each guest's QEMU runs as a user of its own, which libvirt gives
        # the guest's files but not the directories they are in: those
        # must let it through, as the README says of a host.
        searchable = [self.state_path]
        while os.path.dirname(searchable[-1]) != searchable[-1]:
            searchable.append(os.path.dirname(searchable[-1]))
        for root, dirs, _ in os.walk(self.state_path):
            searchable += [os.path.join(root, name) for name in dirs]
        for directory in searchable:
            os.chmod(directory, os.stat(directory).st_mode | 0o001)

    def options(self):
        options = super().options()
        options[('compute', 'driver')] = 'libvirt'
        return options

    def kill_guests(self):
        import libvirt
        libvirt.registerErrorHandler(lambda *_: None, None)
        connection = libvirt.open(libvirt_daemon.URI)
        try:
            for host in self.hosts:
                guests = os.path.join(self.state_path, host, 'guests')
                for uuid in (os.listdir(guests) if os.path.isdir(guests)
                             else []):
                    try:
                        connection.lookupByUUIDString(uuid).destroy()
                    except libvirt.libvirtError:
                        pass  # Not running.
        finally:
            connection.close()


class LibvirtLiveMigrationTest(test_real_guests.LiveDataPath,
                               LibvirtGuestTestCase):
    pass

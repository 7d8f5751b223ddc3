"""The libvirt driver's domain XML, built from a guest's record and read
back from libvirt's live XML; no libvirtd needed."""

import tempfile
from xml.etree import ElementTree

from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig.compute.drivers.libvirt import domain
from volmig.conf import CONF

UUID = '0f3c9a52-5b5e-4d52-9a43-2f6a0d5c7e11'


def disk(volume_id, target, **values):
    return dict({'volume_id': volume_id, 'attachment_id': 'a-' + volume_id,
                 'attach_mode': 'rw', 'multiattach': False,
                 'boot_index': None, 'target': target,
                 'path': '/pools/a/volume-' + volume_id, 'overlay': None},
                **values)


class DomainXmlTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(volmig_fixtures.ConfFixture())
        conf.conf(group='qemu', max_disks=3, memory_mb=128, direct_io=True)
        self.guest = domain.Guest(tempfile.mkdtemp(), UUID)
        self.addCleanup(self.guest.remove)
        self.guest.record.update(uid=5000, disks={
            'data': disk('data', 'vdb', overlay='/guest/overlay.qcow2'),
            'boot': disk('boot', 'vda', boot_index=0),
            'shared': disk('shared', 'vdc', attach_mode='ro',
                           multiattach=True, front='/guest/front.qcow2')})

    def xml(self, accel='tcg', image=None):
        return ElementTree.fromstring(domain.domain_xml(
            self.guest, CONF, accel, image))

    def test_a_guest_of_its_own_user_with_room_to_plug(self):
        root = self.xml(image={'kernel': '/img/k', 'initrd': '/img/i',
                               'cmdline': 'console=ttyS0'})
        self.assertEqual(('qemu', 'volmig-' + UUID, UUID, '128'), (
            root.get('type'), root.findtext('name'), root.findtext('uuid'),
            root.findtext('memory')))
        self.assertEqual(('/img/k', '/img/i', 'console=ttyS0'), (
            root.findtext('os/kernel'), root.findtext('os/initrd'),
            root.findtext('os/cmdline')))
        label = root.find('seclabel')
        self.assertEqual(('static', 'dac', 'yes', '+5000:+5000'), (
            label.get('type'), label.get('model'), label.get('relabel'),
            label.findtext('label')))
        self.assertEqual(3, len(root.findall(
            "devices/controller[@model='pcie-root-port']")))
        self.assertEqual(self.guest.path('console.log'), root.find(
            'devices/serial/source').get('path'))
        self.assertEqual('kvm', self.xml(accel='kvm').get('type'))

    def test_each_disk_as_it_stands(self):
        disks = {d.find('target').get('dev'): d
                 for d in self.xml().findall('devices/disk')}
        self.assertEqual(['vda', 'vdb', 'vdc'], sorted(disks))
        boot, data, shared = disks['vda'], disks['vdb'], disks['vdc']
        self.assertEqual(('raw', 'none', '/pools/a/volume-boot', '1'), (
            boot.find('driver').get('type'), boot.find('driver').get('cache'),
            boot.find('source').get('file'), boot.find('boot').get('order')))
        # On its overlay: the guest's writes go there, src beneath.
        self.assertEqual(('qcow2', '/guest/overlay.qcow2',
                          '/pools/a/volume-data'), (
            data.find('driver').get('type'), data.find('source').get('file'),
            data.find('backingStore/source').get('file')))
        self.assertIsNone(data.find('readonly'))
        self.assertIsNotNone(shared.find('readonly'))
        self.assertIsNotNone(shared.find('shareable'))
        # Read through its front: the volume is a read-only backing file.
        self.assertEqual(('qcow2', '/guest/front.qcow2',
                          '/pools/a/volume-shared'), (
            shared.find('driver').get('type'),
            shared.find('source').get('file'),
            shared.find('backingStore/source').get('file')))
        self.assertEqual('shared', shared.findtext('serial'))

    def test_a_snapshot_takes_one_disk_only(self):
        snapshot = ElementTree.fromstring(domain.snapshot_xml(
            self.guest, self.guest.disks['boot'], '/guest/new.qcow2'))
        found = {d.get('name'): d for d in snapshot.findall('disks/disk')}
        self.assertEqual(('external', '/guest/new.qcow2'), (
            found['vda'].get('snapshot'),
            found['vda'].find('source').get('file')))
        self.assertEqual({'no'}, {found[name].get('snapshot')
                                  for name in ('vdb', 'vdc')})

    def test_free_target(self):
        self.assertEqual('vdd', domain.free_target(
            self.guest.disks.values()))
        self.assertEqual('vda', domain.free_target([]))

    def test_record_survives_a_reload(self):
        self.guest.save()
        again = domain.Guest(self.guest.directory, UUID).load()
        self.assertEqual(self.guest.record, again.record)


LIVE = """<domain><devices>
<disk type='file' device='disk'><source file='/g/overlay.qcow2' index='3'/>
  <backingStore type='file' index='1'><format type='raw'/>
    <source file='/pools/a/src'/><backingStore/></backingStore>
  <target dev='vda' bus='virtio'/></disk>
<disk type='file' device='disk'><source file='/pools/b/dst' index='4'/>
  <backingStore/><target dev='vdb' bus='virtio'/></disk>
</devices></domain>"""


class LiveDiskTest(base.BaseTestCase):

    def test_where_each_disk_is(self):
        self.assertEqual({'source': '/g/overlay.qcow2',
                          'backing': '/pools/a/src'},
                         domain.live_disk(LIVE, 'vda'))
        self.assertEqual({'source': '/pools/b/dst', 'backing': None},
                         domain.live_disk(LIVE, 'vdb'))
        self.assertIsNone(domain.live_disk(LIVE, 'vdc'))

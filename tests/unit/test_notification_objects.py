"""Each notification payload's fingerprint against its version: a field
changed without a version bump fails here."""

from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fixture
from oslotest import base

from volmig.notifications import objects

# <name>: <version>-<fingerprint>. A change to a payload's fields changes
# its fingerprint: bump its VERSION, say what changed beside it, update
# doc/notification_samples (VOLMIG_WRITE_SAMPLES=1 in the functional
# test), then the fingerprint here.
EXPECTED = {
    'BlockDevicePayload': '1.0-78f9cf814d411918ad71c4679106cca3',
    'DrainPayload': '1.0-84099afa795fc71ca9c778ad651856be',
    'DrainVolumePayload': '1.0-409d575b9c0022c0a4f1c11309939632',
    'ExceptionPayload': '1.0-f588e6166977aa92e065a2ff1b94d24c',
    'ServiceStatusPayload': '1.0-17c8f4d29f7999d84c81f3bfe4f9bb43',
    'InstanceActionVolumePayload': '1.1-ed397cc23a79dbe4579435e4d1df9044',
    'InstanceActionVolumeSwapPayload': '1.1-13e5ad713de7969c472301453fa64295',
    'InstanceCreatePayload': '1.1-ad663c46d80ac5be83417eac7da3eb64',
    'VolumeMigrationPayload': '1.1-d92f954476dc081e20d036a20ef0b08b',
    'VolumeMigrationUpdatePayload': '1.0-1d0d020d739740009c8868b2bd76802d',
}


class PayloadVersionTest(base.BaseTestCase):

    def test_every_payload_is_at_the_version_of_its_fields(self):
        checker = fixture.ObjectVersionChecker(
            {name: classes for name, classes
             in ovo_base.VersionedObjectRegistry.obj_classes().items()
             if issubclass(classes[0], objects.VolmigObject)})
        expected, actual = checker.test_hashes(EXPECTED)
        self.assertEqual(expected, actual)

    def test_a_payload_sends_only_what_it_was_given(self):
        # The sender's dict, nested payloads as dicts; no change marks.
        payload = objects.InstanceCreatePayload.of({
            'uuid': '7f2b5b8e-3c7a-4a7e-9c55-3a0b8b6f1a21', 'name': 'vm',
            'block_devices': [{
                'volume_id': 'a3c1c6de-4d2f-4f0e-9b1a-5d5d2c7b9e10',
                'attach_mode': 'rw', 'boot_index': 0}]})
        payload.obj_reset_changes(recursive=True)
        primitive = payload.obj_to_primitive()
        self.assertEqual('InstanceCreatePayload',
                         primitive['volmig_object.name'])
        self.assertEqual({'uuid', 'name', 'block_devices'},
                         set(primitive['volmig_object.data']))
        [device] = primitive['volmig_object.data']['block_devices']
        self.assertEqual({'volume_id': 'a3c1c6de-4d2f-4f0e-9b1a-5d5d2c7b9e10',
                          'attach_mode': 'rw', 'boot_index': 0},
                         device['volmig_object.data'])
        self.assertNotIn('volmig_object.changes', primitive)

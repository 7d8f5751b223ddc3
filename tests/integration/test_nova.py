"""Volumes of Nova's servers, moved on a real Nova.

One Keystone, Cinder (two NFS backends) and Nova (placement, api,
conductor, scheduler, compute on libvirt under TCG) serve the class. A
tenant's server boots from a Cinder volume of volmig-guest, which writes
to its root volume and to a data volume; every write it acknowledged is
compared with the volume's file after a clean stop.

volmig's side runs in the test process: the paths it picks
(``volmig.nova.paths``) and the offline move of a stopped server's
volumes (``volmig.nova.offline``), on ``[cinder]`` and ``[nova]`` as an
operator would set them.
"""

import os
import subprocess  # nosec B404

from keystoneauth1 import loading as ks_loading
from oslotest import base
import testtools

from tests import cinder_deployment
from tests import fixtures as volmig_fixtures
from tests import nova_deployment
from tests import openstack
from tests import real_guest
from volmig.block_storage import cinder as cinder_storage
from volmig.conf import CONF
from volmig.demo import writes as guest_writes
from volmig.nova import compute
from volmig.nova import offline
from volmig.nova import paths


@testtools.skipIf(nova_deployment.missing(), nova_deployment.missing())
class NovaTestCase(base.BaseTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._deployment = deployment = openstack.Processes()
        deployment.setUp()
        try:
            cls.keystone = deployment.useFixture(openstack.Keystone())
            cls.keystone.service_user('volmig')
            cls.keystone.user('alice', cls.keystone.project('tenant-a'),
                              ('member',))
            cls.alice = cls.keystone.session(
                'alice', openstack.SERVICE_PASSWORD, 'tenant-a')
            port = openstack.free_port()
            cls.cinder = deployment.useFixture(cinder_deployment.Cinder(
                cls.keystone, 'http://127.0.0.1:%d/v2.1' % port,
                own_fs=True))
            cls.nova = deployment.useFixture(nova_deployment.Nova(
                cls.keystone, cls.cinder, port))
        except Exception:
            deployment.cleanUp()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._deployment.cleanUp()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        conf = self.useFixture(volmig_fixtures.ConfFixture()).conf
        # keystoneauth registers a plugin's options as it loads it.
        for group in ('cinder', 'nova'):
            CONF.register_opts(
                ks_loading.get_auth_plugin_conf_options('password'),
                group=group)
        for (group, name), value in self.cinder.volmig_options().items():
            if group in ('cinder', 'nova'):
                conf(group=group, **{name: value})
                if group == 'cinder':
                    conf(group='nova', **{name: value})
        # As an operator would: nova-manage with Nova's PATH (privsep's
        # helper) and configuration.
        manage = ['env', 'PATH=%s' % self.nova.env['PATH'],
                  self.nova.binary('nova-manage'), '--config-file',
                  self.nova.conf]
        conf(group='nova', manage_command=manage,
             connector_command=manage + ['volume_attachment',
                                         'get_connector', '--json'])
        self.volumes = cinder_storage.CinderVolumeAdapter(CONF)
        self.novas = compute.Nova(CONF)
        self.pools = {name: self.cinder.pool_of(name)
                      for name in cinder_deployment.BACKENDS}
        self.consoles: dict[str, str] = {}

    def volume(self, backend: str) -> dict:
        """A 1 GiB volume of alice's on ``backend``, available."""
        answer = self.cinder.request('POST', '/volumes', self.alice, json={
            'volume': {'size': 1, 'volume_type': 'swap'}})
        self.assertEqual(202, answer.status_code, answer.text)
        volume_id = answer.json()['volume']['id']
        volume = self.wait_volume(volume_id, lambda v: v['status'] in (
            'available', 'error'))
        self.assertEqual('available', volume['status'])
        # Cinder's scheduler picks either backend of type swap.
        if volume['os-vol-host-attr:host'] != self.pools[backend]:
            self.cinder_migrate(volume_id, backend)
        return self.cinder.volume(volume_id)

    def cinder_migrate(self, volume_id: str, backend: str) -> dict:
        answer = self.cinder.request(
            'POST', '/volumes/%s/action' % volume_id, json={
                'os-migrate_volume': {'host': self.pools[backend]}})
        self.assertEqual(202, answer.status_code, answer.text)
        volume = self.wait_volume(volume_id, lambda v: v[
            'migration_status'] in ('success', 'error'))
        self.assertEqual(self.pools[backend],
                         volume['os-vol-host-attr:host'],
                         self.cinder.errors())
        return volume

    def wait_volume(self, volume_id: str, done) -> dict:
        return openstack.wait_for(
            'volume %s' % volume_id,
            lambda: (lambda v: v if done(v) else None)(
                self.cinder.volume(volume_id)), timeout=180)

    def nova_action(self, server_id: str, body: dict, session=None):
        return self.nova.request('POST', '/servers/%s/action' % server_id,
                                 session, json=body)

    def disks(self, server_id: str) -> list[str]:
        """The files the guest's domain has as its disks, in libvirt."""
        name = self.nova.server(server_id)['OS-EXT-SRV-ATTR:instance_name']
        listed = subprocess.run(['virsh', 'domblklist', name],
                                capture_output=True, text=True, check=True)
        return sorted(line.split()[1] for line in
                      listed.stdout.splitlines()[2:] if line.strip())

    def console(self, server_id: str) -> str:
        """The guest's console since it first booted: libvirt starts a
        new log at each start of the domain."""
        return self.consoles.get(server_id, '') + self.nova.console_log(
            server_id)

    def power(self, server_id: str, body: dict) -> None:
        """A start or a reboot by the server's owner, once it is done."""
        self.consoles[server_id] = self.console(server_id)
        self.assertEqual(202, self.nova_action(
            server_id, body, self.alice).status_code)
        self.nova.wait_for_status(server_id, 'ACTIVE')

    def acks(self, server_id: str, volume_id: str) -> list:
        # The guest names a disk by its virtio serial: the volume id,
        # cut to 20 characters.
        return guest_writes.acknowledged(self.console(server_id),
                                         volume_id[:20])

    def wait_for_acks(self, server_id: str, volume_ids, count: int):
        openstack.wait_for('the guest to write', lambda: all(
            len(self.acks(server_id, v)) >= count for v in volume_ids),
            timeout=120)

    def stop(self, server_id: str) -> None:
        """A clean stop (ACPI: the guest finishes its writes and
        syncs)."""
        self.assertEqual(202, self.nova_action(
            server_id, {'os-stop': None}, self.alice).status_code)
        self.nova.wait_for_status(server_id, 'SHUTOFF')
        self.assertIn('volmig-guest: DONE', self.nova.console_log(server_id))

    def assert_bytes(self, server_id: str, volume_id: str, region: int,
                     clean: bool = True) -> None:
        """The volume's file, wherever Cinder has it, holds every write
        the guest acknowledged on it (after a hard reboot, an abrupt
        stop, a block may be newer than its acknowledgement)."""
        acks = self.acks(server_id, volume_id)
        self.assertTrue(acks)
        path = self.cinder.volume_file(self.cinder.volume(volume_id))
        self.assertEqual([], guest_writes.mismatches(
            path, acks, region=region, clean=clean))

    def test_stopped_then_running_server(self):
        """A stopped server's root and data volumes move offline, held,
        and its next start, and a hard reboot, boot the new backend with
        every acknowledged write; then, running, its data volume moves
        back through Nova's swap."""
        root = self.volume('nfs-a')
        real_guest.boot_volume(self.cinder.volume_file(root))
        self.cinder.request('POST', '/volumes/%s/action' % root['id'],
                            json={'os-set_bootable': {'bootable': True}})
        data = self.volume('nfs-a')
        server_id = self.nova.boot(root['id'], self.alice)['id']
        attached = self.nova.request(
            'POST', '/servers/%s/os-volume_attachments' % server_id,
            self.alice, json={'volumeAttachment': {'volumeId': data['id']}})
        self.assertEqual(200, attached.status_code, attached.text)
        self.wait_volume(data['id'], lambda v: v['status'] == 'in-use')
        self.wait_for_acks(server_id, (root['id'], data['id']), 20)
        self.stop(server_id)
        regions = {root['id']: real_guest.BOOT_REGION, data['id']: 0}

        ctxt_volumes = {v: self.volumes.get_volume(None, v)
                        for v in (root['id'], data['id'])}
        servers = self.novas.servers([server_id])
        for volume in ctxt_volumes.values():
            self.assertEqual(paths.OFFLINE,
                             paths.classify(volume, servers)[0])
        mover = offline.OfflineMove(self.volumes, self.novas)
        held = mover.hold([server_id], 'volmig: draining nfs-a')
        self.assertEqual([server_id], held)
        # Held: its owner cannot start it.
        self.assertEqual(409, self.nova_action(
            server_id, {'os-start': None}, self.alice).status_code)
        old_files = [self.cinder.volume_file(self.cinder.volume(v))
                     for v in ctxt_volumes]
        for volume_id in ctxt_volumes:
            moved = mover.move(volume_id, [server_id], self.pools['nfs-b'])
            self.assertEqual(self.pools['nfs-b'], moved['host'])
            self.assertEqual('in-use', moved['status'])
        mover.release(held)
        self.assertFalse(self.nova.server(server_id)['locked'])
        for path in old_files:
            self.assertFalse(os.path.exists(path), path)
        for volume_id, region in regions.items():
            self.assert_bytes(server_id, volume_id, region)

        # The next start, and a hard reboot, boot the new backend.
        nfs_b = self.nova.mount_of(self.cinder.exports['nfs-b'])
        files = sorted(os.path.join(nfs_b, os.path.basename(
            self.cinder.volume_file(self.cinder.volume(v))))
            for v in ctxt_volumes)
        newest = max(self.acks(server_id, data['id']))
        for body in ({'os-start': None}, {'reboot': {'type': 'HARD'}}):
            self.power(server_id, body)
            self.assertEqual(files, self.disks(server_id))
        openstack.wait_for('writes after the move', lambda: max(
            self.acks(server_id, data['id'])) > newest + 10, timeout=120)

        # Running: Nova's swap, through Cinder's migration.
        volume = self.volumes.get_volume(None, data['id'])
        self.assertEqual(paths.SWAP, paths.classify(
            volume, self.novas.servers([server_id]))[0])
        self.volumes.migrate_volume(None, data['id'], self.pools['nfs-a'])
        self.wait_volume(data['id'], lambda v: v['migration_status'] in (
            'success', 'error'))
        self.assertEqual(self.pools['nfs-a'], self.cinder.volume(
            data['id'])['os-vol-host-attr:host'], self.cinder.errors())
        self.assertIn(os.path.join(
            self.nova.mount_of(self.cinder.exports['nfs-a']),
            os.path.basename(self.cinder.volume_file(self.cinder.volume(
                data['id'])))), self.disks(server_id))
        self.stop(server_id)
        # The hard reboot stopped the guest abruptly.
        for volume_id, region in regions.items():
            self.assert_bytes(server_id, volume_id, region, clean=False)

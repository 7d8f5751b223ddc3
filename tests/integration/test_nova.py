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

import hashlib
import json
import os
import signal
import subprocess  # nosec B404
from urllib.parse import quote

from keystoneauth1 import loading as ks_loading
from oslo_config import fixture as config_fixture
import testtools

from tests import cinder_deployment
from tests import nova_deployment
from tests import openstack
from tests import real_guest
from tests.integration import base
from volmig.block_storage import cinder as cinder_storage
from volmig.conf import CONF
from volmig.demo import writes as guest_writes
from volmig.nova import compute
from volmig.nova import offline
from volmig.nova import paths


@testtools.skipIf(nova_deployment.missing(), nova_deployment.missing())
class NovaTestCase(base.DeployedOnceTestCase):
    COMPUTES = 1

    @classmethod
    def deploy(cls, deployment):
        cls.keystone = deployment.useFixture(openstack.Keystone())
        cls.keystone.service_user('volmig')
        cls.keystone.user('alice', cls.keystone.project('tenant-a'),
                          ('member',))
        cls.alice = cls.keystone.session('alice', openstack.SERVICE_PASSWORD,
                                         'tenant-a')
        # Cinder's compute API is Nova's.
        port = openstack.free_port()
        cls.cinder = deployment.useFixture(cinder_deployment.Cinder(
            cls.keystone, 'http://127.0.0.1:%d/v2.1' % port, own_fs=True))
        # Nova's compute host has the name of volmig's agent beside it,
        # which reads Nova's guests there for the drain's checks.
        cls.nova = deployment.useFixture(nova_deployment.Nova(
            cls.keystone, cls.cinder, port, 'compute-1'))

    def nova_options(self) -> dict:
        """``[cinder]`` and ``[nova]`` as an operator sets them: volmig's
        own user (admin and service roles) on both, and nova-manage with
        Nova's PATH (privsep's helper) and configuration."""
        options = {}
        for (group, name), value in self.cinder.volmig_options().items():
            options[group, name] = value
            if group == 'cinder':
                options['nova', name] = value
        # Their defaults, which a test's configuration fixture clears as
        # it ends (oslo.config's reset).
        options['cinder', 'service_type'] = 'volumev3'
        options['nova', 'service_type'] = 'compute'
        manage = ['env', 'PATH=%s' % self.nova.env['PATH'],
                  self.nova.binary('nova-manage'), '--config-file',
                  self.nova.conf]
        options['nova', 'manage_command'] = manage
        options['nova', 'connector_command'] = manage + [
            'volume_attachment', 'get_connector', '--json']
        return options

    def process_options(self):
        def written(options):
            return {key: ','.join(value) if isinstance(value, list)
                    else value for key, value in options.items()}
        options = {name: written(self.nova_options())
                   for name in ('conductor', 'api', *self.hosts)}
        options['api'].update(self.keystone.authtoken_options())
        return options

    def setUp(self):
        super().setUp()
        conf = self.conf_fixture.conf
        # keystoneauth registers a plugin's options as it loads it;
        # these go with the test.
        options = self.useFixture(config_fixture.Config(CONF))
        for group in ('cinder', 'nova'):
            options.register_opts(
                ks_loading.get_auth_plugin_conf_options('password'),
                group=group)
        for (group, name), value in self.nova_options().items():
            if group in ('cinder', 'nova'):
                conf(group=group, **{name: value})
        self.volumes = cinder_storage.CinderVolumeAdapter(CONF)
        self.novas = compute.Nova(CONF)
        self.pools = {name: self.cinder.pool_of(name)
                      for name in cinder_deployment.BACKENDS}
        self.consoles: dict[str, str] = {}
        self.operator = self.keystone.session(
            'volmig', openstack.SERVICE_PASSWORD, 'service')

    def rest(self, method: str, path: str, body=None):
        """volmig's API as an operator (volmig's admin user)."""
        return self.operator.request(self.endpoint + path, method,
                                     json=body, raise_exc=False)

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

    def boot_again(self, server_id: str, volume_ids) -> None:
        """A start, then a hard reboot, each booting the server on its
        volumes' files where Cinder has them now; then the guest writes
        on each volume again. Until it does, it may still be booting, and
        a clean stop would come before its power button is heard."""
        newest = {v: max(self.acks(server_id, v)) for v in volume_ids}
        files = {os.path.join(self.nova.mount_of(os.path.dirname(path)),
                              os.path.basename(path))
                 for path in (self.cinder.volume_file(self.cinder.volume(v))
                              for v in volume_ids)}
        for body in ({'os-start': None}, {'reboot': {'type': 'HARD'}}):
            self.power(server_id, body)
            self.assertLessEqual(files, set(self.disks(server_id)))
        openstack.wait_for('writes after the move', lambda: all(
            max(self.acks(server_id, v)) > newest[v] + 10
            for v in volume_ids), timeout=120)

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
        reason = 'volmig: draining nfs-a'
        mover.hold([server_id], reason)
        # Held: its owner cannot start it.
        self.assertEqual(409, self.nova_action(
            server_id, {'os-start': None}, self.alice).status_code)
        old_files = [self.cinder.volume_file(self.cinder.volume(v))
                     for v in ctxt_volumes]
        for volume_id in ctxt_volumes:
            mover.let_go(volume_id, [server_id])
            self.volumes.migrate_volume(None, volume_id, self.pools['nfs-b'])
            self.wait_volume(volume_id, lambda v: v['migration_status'] in (
                'success', 'error'))
            mover.refresh(volume_id, [server_id])
            moved = self.volumes.get_volume(None, volume_id)
            self.assertEqual(self.pools['nfs-b'], moved['host'])
            self.assertEqual('in-use', moved['status'])
        mover.release([server_id], reason)
        self.assertFalse(self.nova.server(server_id)['locked'])
        for path in old_files:
            self.assertFalse(os.path.exists(path), path)
        for volume_id, region in regions.items():
            self.assert_bytes(server_id, volume_id, region)

        # The next start, and a hard reboot, boot the new backend.
        self.boot_again(server_id, ctxt_volumes)

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

    def boot_from_volume(self, *data_ids: str) -> tuple[str, str]:
        """alice's server booting from a new volume of volmig-guest on
        nfs-a, with the data volumes attached; (server, root volume)."""
        root = self.volume('nfs-a')
        real_guest.boot_volume(self.cinder.volume_file(root))
        self.cinder.request('POST', '/volumes/%s/action' % root['id'],
                            json={'os-set_bootable': {'bootable': True}})
        server_id = self.nova.boot(root['id'], self.alice)['id']
        for volume_id in data_ids:
            attached = self.nova.request(
                'POST', '/servers/%s/os-volume_attachments' % server_id,
                self.alice, json={'volumeAttachment': {
                    'volumeId': volume_id}})
            self.assertEqual(200, attached.status_code, attached.text)
            self.wait_volume(volume_id, lambda v: server_id in {
                a['server_id'] for a in v['attachments']})
        return server_id, root['id']

    def share(self, server_ids, read_only: bool = False) -> str:
        """A multiattach volume of alice's on nfs-a, attached to each
        server, read-only if Cinder's flag says so."""
        answer = self.cinder.request('POST', '/volumes', self.alice, json={
            'volume': {'size': 1, 'volume_type': 'nfs-a-multi'}})
        self.assertEqual(202, answer.status_code, answer.text)
        volume_id = answer.json()['volume']['id']
        self.wait_volume(volume_id, lambda v: v['status'] == 'available')
        if read_only:
            answer = self.cinder.request(
                'POST', '/volumes/%s/action' % volume_id, json={
                    'os-update_readonly_flag': {'readonly': True}})
            self.assertEqual(202, answer.status_code, answer.text)
        for count, server_id in enumerate(server_ids, 1):
            attached = self.nova.request(
                'POST', '/servers/%s/os-volume_attachments' % server_id,
                self.alice, json={'volumeAttachment': {
                    'volumeId': volume_id}})
            self.assertEqual(200, attached.status_code, attached.text)
            self.wait_volume(volume_id, lambda v, n=count: v['status'] ==
                             'in-use' and len(v['attachments']) == n)
        modes = {a['attach_mode'] for a in self.volumes.get_volume(
            None, volume_id)['attachments']}
        self.assertEqual({'ro' if read_only else 'rw'}, modes)
        return volume_id

    def digest(self, volume_id: str) -> str:
        """sha256 of the volume's file, wherever Cinder has it."""
        with open(self.cinder.volume_file(self.cinder.volume(volume_id)),
                  'rb') as handle:
            return hashlib.file_digest(handle, 'sha256').hexdigest()

    def drain_show(self) -> dict:
        answer = self.rest('GET', '/os-volume-pools/%s' % quote(
            self.pools['nfs-a'], safe=''))
        self.assertEqual(200, answer.status_code, answer.text)
        return answer.json()['drain']

    def test_drain_of_a_backend_under_novas_servers(self):
        """One drain moves each volume of nfs-a by its own path (a running
        server's root and data volumes through Nova's swap, a stopped
        server's offline, a detached one by Cinder's copy), refuses a
        volume two servers write, resumes after its conductor is killed,
        and leaves every server booting the new backend with its
        writes."""
        data_a = self.volume('nfs-a')['id']
        server_a, root_a = self.boot_from_volume(data_a)
        data_b = self.volume('nfs-a')['id']
        server_b, root_b = self.boot_from_volume(data_b)
        shared = self.share((server_a, server_b))
        read_only = self.share((server_a, server_b), read_only=True)
        detached = self.volume('nfs-a')['id']
        with open(self.cinder.volume_file(self.cinder.volume(detached)),
                  'r+b') as handle:
            for offset in range(0, 1024, 97):
                handle.seek(offset * 1024 * 1024)
                handle.write(os.urandom(65536))
        detached_sum = self.digest(detached)
        regions = {root_a: real_guest.BOOT_REGION, data_a: 0,
                   root_b: real_guest.BOOT_REGION, data_b: 0}
        self.wait_for_acks(server_a, (root_a, data_a), 10)
        self.wait_for_acks(server_b, (root_b, data_b), 10)
        self.stop(server_b)

        # The operator's dry run, on the command line: a Cinder pool's
        # name has an '@' and a '#'.
        code, out, err = self.cli(
            'volume', 'pool', 'drain', 'start', self.pools['nfs-a'], '--to',
            self.pools['nfs-b'], '--dry-run', '-f', 'json',
            token=self.operator.get_token())
        self.assertEqual(0, code, err)
        actions = {row['Volume ID']: (row['Action'], row['Reason'])
                   for row in json.loads(out)}
        self.assertEqual(
            {root_a: 'swap', data_a: 'swap', root_b: 'offline',
             data_b: 'offline', shared: 'none', read_only: 'none',
             detached: 'copy'},
            {volume_id: action for volume_id, (action, _) in
             actions.items()})
        self.assertIn('read/write', actions[shared][1])
        # Nova's swap fails on it (measured), and Cinder would complete
        # on the first server's swap: refused while a server runs.
        self.assertIn('read-only to 2 servers, 1 running',
                      actions[read_only][1])

        pool = quote(self.pools['nfs-a'], safe='')
        body = {'drain': {'to': self.pools['nfs-b'], 'max_parallel': 1}}
        # A tenant may not drain a pool, her own volumes' or any.
        refused = self.alice.request(
            self.endpoint + '/os-volume-pools/%s/action' % pool, 'POST',
            json=body, raise_exc=False)
        self.assertEqual(403, refused.status_code, refused.text)
        self.assertNotIn('Traceback', refused.text)
        self.assertEqual(404, self.rest(
            'GET', '/os-volume-pools/%s' % pool).status_code)
        started = self.rest('POST', '/os-volume-pools/%s/action' % pool,
                            body)
        self.assertEqual(202, started.status_code, started.text)
        # Killed mid-way, with a move under way, then resumed.
        openstack.wait_for('a volume to move', lambda: any(
            e['state'] == 'migrating' for e in self.drain_show()['volumes']),
            timeout=120)
        self.cluster.restart('conductor', sig=signal.SIGKILL).wait_ready()
        drain = openstack.wait_for(
            'the drain to end', lambda: (lambda d: d if d['status'] !=
                                         'running' else None)(
                self.drain_show()), timeout=600)
        states = {e['volume_id']: (e['state'], e['reason'])
                  for e in drain['volumes']}
        self.assertEqual('completed', drain['status'], states)
        refused = (shared, read_only)
        for volume_id in refused:
            self.assertEqual('skipped', states.pop(volume_id)[0])
            self.assertEqual(self.pools['nfs-a'], self.cinder.volume(
                volume_id)['os-vol-host-attr:host'])
        self.assertEqual({'done'}, {s for s, _ in states.values()}, states)
        for volume_id in states:
            self.assertEqual(self.pools['nfs-b'], self.cinder.volume(
                volume_id)['os-vol-host-attr:host'])
        self.assertFalse(self.nova.server(server_b)['locked'])
        # What the drain did, and how it checked it, as the operator
        # reads it: each swap where server A runs left its live disk on
        # the file Nova's record names, on nfs-b's mount.
        code, out, err = self.cli(
            'volume', 'pool', 'drain', 'show', self.pools['nfs-a'], '-f',
            'json', token=self.operator.get_token())
        self.assertEqual(0, code, err)
        checks = {row['Volume ID']: row['Check'] for row in json.loads(out)}
        nfs_b = self.nova.mount_of(self.cinder.exports['nfs-b'])
        for volume_id in (root_a, data_a):
            self.assertIn('live disk on host compute-1 is %s' % os.path.join(
                nfs_b, os.path.basename(self.cinder.volume_file(
                    self.cinder.volume(volume_id)))), checks[volume_id])
        # Cinder's copies, hashed by volmig's agent before and after.
        for volume_id in (detached, root_b, data_b):
            self.assertIn("before Cinder's copy and after",
                          checks[volume_id])
        self.assertIn('sha256 %s' % detached_sum, checks[detached])
        self.assertEqual(detached_sum, self.digest(detached))
        # Drained again, the pool has only the refused volumes to plan.
        again = self.rest('POST', '/os-volume-pools/%s/action' % pool, {
            'drain': {'to': self.pools['nfs-b'], 'dry_run': True}})
        self.assertEqual(200, again.status_code, again.text)
        self.assertEqual(sorted((v, 'none') for v in refused), sorted(
            (e['volume_id'], e['action'])
            for e in again.json()['drain']['volumes']))
        # Nothing left on the old backend but the refused volumes.
        export = self.cinder.exports['nfs-a']
        openstack.wait_for('Cinder to delete what it moved', lambda: sorted(
            os.listdir(export)) == sorted(
                os.path.basename(self.cinder.volume_file(
                    self.cinder.volume(v))) for v in refused), timeout=60)

        self.stop(server_a)
        for server_id, volumes in ((server_a, (root_a, data_a)),
                                   (server_b, (root_b, data_b))):
            for volume_id in volumes:
                self.assert_bytes(server_id, volume_id, regions[volume_id])
            # Started, then hard-rebooted: the new backend each time.
            self.boot_again(server_id, volumes)
            self.stop(server_id)
            for volume_id in volumes:
                self.assert_bytes(server_id, volume_id, regions[volume_id],
                                  clean=False)

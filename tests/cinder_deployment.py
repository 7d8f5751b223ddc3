"""Real Cinder (api, scheduler, volume) as processes, for the tests.

It runs from ``.venv-cinder`` on PostgreSQL and a RabbitMQ vhost of its
own, with two backends of its NFS driver. Each backend's share is a local
directory bind-mounted where os-brick looks for the share's mount
(``<mnt>/<md5 of the share>``), so no NFS is mounted; volmig's agents use
the same mount base. Cinder authenticates with Keystone
(``auth_strategy = keystone``).

Two more backends, nfs-c and nfs-d, belong to a second cinder-volume that
loads volmig's manager (``volume_manager``); a test starts it on its own
volmig's broker with ``start_volmig_volume``. nfs-d's share is a small
tmpfs, so a copy of a volume full of data fails there.
"""

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import uuid

import fixtures
import sqlalchemy as sa

from tests import fixtures as volmig_fixtures
from tests import openstack
from tests.integration import cluster
from volmig import signing
from volmig.conf import CONF

BACKENDS = ('nfs-a', 'nfs-b')
# Run by the cinder-volume that loads volmig's manager.
VOLMIG_BACKENDS = ('nfs-c', 'nfs-d')
VOLMIG_MANAGER = 'volmig.cinder_volume.manager.VolumeManager'
# nfs-d's share: room for the writes of a guest, not for 256 MiB.
SMALL_SHARE = '160m'
# Of the exports' own file system, sparse.
EXPORTS_SIZE = 16 * 1024 ** 3
PG_URL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'


class Cinder(openstack.Processes):
    """cinder-api, cinder-scheduler and cinder-volume, two NFS backends.

    ``compute_url`` is what Cinder calls for swaps and attachment checks:
    it is registered in Keystone's catalog as ``compute``.
    """

    def __init__(self, keystone: openstack.Keystone, compute_url: str,
                 small_share: bool = True, own_fs: bool = False):
        super().__init__()
        self.keystone = keystone
        self.compute_url = compute_url
        # nfs-d on a small tmpfs, where a large copy fails.
        self.small_share = small_share
        # The exports on a file system of their own, as Nova's NFS driver
        # needs them (``tests.nova_deployment``).
        self.own_fs = own_fs

    def _setUp(self):
        super()._setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.mount_base = os.path.join(self.dir, 'mnt')
        self.port = openstack.free_port()
        self.keystone.service_user('cinder')
        self.project_id = self.keystone.service_project
        self.keystone.register('volumev3', 'http://127.0.0.1:%d/v3/'
                               '$(project_id)s' % self.port)
        self.keystone.register('compute', self.compute_url)
        vhost = self.useFixture(cluster.VhostFixture())
        self.db_url = db_url = self._database()
        self.exports = {}
        if self.own_fs:
            self._file_system(os.path.join(self.dir, 'exports'))
        backends = {}
        for name in BACKENDS + VOLMIG_BACKENDS:
            backends.update(self._backend(name))
        conf = os.path.join(self.dir, 'cinder.conf')
        etc = os.path.join(openstack.CINDER_VENV, 'etc', 'cinder')
        auth = {'auth_url': self.keystone.url, 'auth_type': 'password',
                'username': 'cinder', 'password': openstack.SERVICE_PASSWORD,
                'user_domain_id': 'default', 'project_name': 'service',
                'project_domain_id': 'default'}
        self._sections = dict({
            'DEFAULT': {
                'auth_strategy': 'keystone', 'debug': 'true',
                'transport_url': vhost.url,
                'osapi_volume_listen': '127.0.0.1',
                'osapi_volume_listen_port': self.port,
                'osapi_volume_workers': 1,
                'api_paste_config': os.path.join(etc, 'api-paste.ini'),
                'resource_query_filters_file': os.path.join(
                    etc, 'resource_filters.json'),
                'state_path': self.dir, 'log_dir': self.dir,
                'lock_path': os.path.join(self.dir, 'locks'),
                'enabled_backends': ','.join(BACKENDS),
                'default_volume_type': BACKENDS[0],
                # The tests' tenants make more volumes than a project's
                # default ten.
                'quota_volumes': 100,
                # Cinder copies detached volumes by itself through
                # os-brick; as root no helper is needed.
                'rootwrap_config': '/dev/null',
                # A stopped service waits this long for its handlers to
                # end (a minute by default), then exits: within the time
                # a test gives a stop.
                'graceful_shutdown_timeout': 10},
            'database': {'connection': db_url},
            'keystone_authtoken': dict(
                auth, www_authenticate_uri=self.keystone.url,
                service_token_roles_required='true'),
            'nova': dict(auth, token_auth_url=self.keystone.url,
                         interface='public'),
            'oslo_concurrency': {'lock_path': os.path.join(self.dir,
                                                           'locks')},
            # Root already: privsep's helper starts without sudo (none
            # here), from the venv's PATH.
            'privsep_osbrick': {
                'helper_command': 'privsep-helper --config-file %s' % conf},
            'privsep': {
                'helper_command': 'privsep-helper --config-file %s' % conf},
            # Cinder inspects a volume's format in its own privsep
            # context when the volume it is handed lacks the admin
            # metadata naming it: a tenant's retype hands it so.
            'cinder_sys_admin': {
                'helper_command': 'privsep-helper --config-file %s' % conf}},
            **backends)
        openstack.ini(conf, self._sections)
        self.env = env = dict(os.environ, PATH='%s:%s' % (
            os.path.join(openstack.CINDER_VENV, 'bin'), os.environ['PATH']))
        self.binary = binary = os.path.join(openstack.CINDER_VENV, 'bin')
        synced = subprocess.run([os.path.join(binary, 'cinder-manage'),
                                 '--config-file', conf, 'db', 'sync'],
                                capture_output=True, text=True, timeout=180,
                                env=env)
        if synced.returncode:
            with open(os.path.join(self.dir, 'cinder-manage.log')) as log:
                raise RuntimeError('cinder-manage db sync failed: %s'
                                   % log.read()[-1500:])
        for service in ('cinder-api', 'cinder-scheduler', 'cinder-volume'):
            self.spawn(service, [os.path.join(binary, service),
                                 '--config-file', conf], self.dir, env=env)
        self.session = self.keystone.session(
            'cinder', openstack.SERVICE_PASSWORD, 'service')
        try:
            openstack.wait_for(
                'cinder-volume with both backends', self._pools_ready,
                timeout=120, process=self.processes['cinder-volume'])
        except RuntimeError as exc:
            raise RuntimeError('%s; its errors:\n%s' % (exc, self.errors()))
        self.types = {}
        for name in BACKENDS + VOLMIG_BACKENDS:
            self.types[name] = self._type(name, {
                'volume_backend_name': name})
            self.types[name + '-multi'] = self._type(name + '-multi', {
                'volume_backend_name': name, 'multiattach': '<is> True'})
        # Either backend of a cinder-volume: a volume of such a type may
        # migrate between them (a type that names a backend may not).
        for name, group in (('swap', 'compute-api'),
                            ('volmig', 'volmig-manager')):
            self.types[name] = self._type(name, {'backend_group': group})

    def start_volmig_volume(self, transport_url: str) -> None:
        """The cinder-volume of nfs-c and nfs-d, with volmig's manager
        reaching volmig on ``transport_url``; stopped by the test."""
        conf = os.path.join(self.dir, 'cinder-volmig.conf')
        # Its own key, from the test's master key, as an operator exports
        # it for the host Cinder runs on (cinder-volume's [DEFAULT] host:
        # this machine's name).
        key_file = volmig_fixtures.export_key(
            CONF.signing.key_file, signing.CLIENT, socket.gethostname(),
            os.path.join(self.dir, 'volmig-client-key.json'))
        sections = dict(self._sections, volmig={
            'transport_url': transport_url, 'timeout': 300},
            signing={'key_file': key_file})
        sections['DEFAULT'] = dict(
            sections['DEFAULT'], enabled_backends=','.join(VOLMIG_BACKENDS),
            volume_manager=VOLMIG_MANAGER,
            log_file='volmig-manager.log')
        openstack.ini(conf, sections)
        log = os.path.join(self.dir, 'volmig-manager.log')
        offset = os.path.getsize(log) if os.path.exists(log) else 0
        process = self.spawn('cinder-volume-volmig', [
            os.path.join(self.binary, 'cinder-volume'), '--config-file',
            conf], self.dir, env=self.env)

        def serving() -> bool:
            # Each backend's process logs this once it consumes its queue.
            with open(log) as lines:
                lines.seek(offset)
                return lines.read().count(
                    'Driver post RPC initialization completed') == len(
                        VOLMIG_BACKENDS)
        try:
            openstack.wait_for("cinder-volume with volmig's manager",
                               lambda: serving() and self._pools_ready(4),
                               timeout=180, process=process)
        except RuntimeError as exc:
            raise RuntimeError('%s; its errors:\n%s' % (exc, self.errors()))

    def pool_of(self, backend: str) -> str:
        """A backend's pool, as ``os-migrate_volume`` names its host."""
        answer = self.request('GET', '/scheduler-stats/get_pools')
        answer.raise_for_status()
        [name] = [pool['name'] for pool in answer.json()['pools']
                  if pool['name'].partition('@')[2].startswith(
                      backend + '#')]
        return name

    def errors(self) -> str:
        """The ERROR lines of every Cinder log, for a failure's message:
        each error's first line and the exception it ends with, not the
        frames of its traceback."""
        found = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith('.log'):
                with open(os.path.join(self.dir, name)) as log:
                    for line in log:
                        message = line.partition(' ERROR ')[2].partition(
                            ' ')[2]
                        if (message and not message.startswith(' ')
                                and not message.startswith('Traceback')
                                and 'log_opt_values' not in message):
                            found.append('%s: %s' % (name,
                                                     message.rstrip()[:400]))
        return '\n'.join(found[:16])

    def _database(self) -> str:
        name = 'cinder_test_%s' % uuid.uuid4().hex[:12]
        admin = sa.create_engine(PG_URL, isolation_level='AUTOCOMMIT')
        self.addCleanup(admin.dispose)
        with admin.connect() as connection:
            connection.execute(sa.text('CREATE DATABASE %s' % name))
        self.addCleanup(self._drop, admin, name)
        return 'postgresql+psycopg2://postgres@127.0.0.1:5432/%s' % name

    @staticmethod
    def _drop(admin, name: str) -> None:
        with admin.connect() as connection:
            connection.execute(sa.text(
                'DROP DATABASE IF EXISTS %s WITH (FORCE)' % name))

    def _file_system(self, path: str) -> None:
        """An ext4 file system in a sparse file, mounted at ``path``."""
        image = path + '.img'
        with open(image, 'wb') as out:
            out.truncate(EXPORTS_SIZE)
        subprocess.run(['mkfs.ext4', '-q', '-F', image], check=True)
        os.makedirs(path)
        subprocess.run(['mount', '-o', 'loop', image, path], check=True)
        self.addCleanup(subprocess.run, ['umount', '-l', path], check=False)

    def _backend(self, name: str) -> dict:
        export = os.path.join(self.dir, 'exports', name)
        os.makedirs(export)
        if name == 'nfs-d' and self.small_share:
            subprocess.run(['mount', '-t', 'tmpfs', '-o',
                            'size=%s' % SMALL_SHARE, 'tmpfs', export],
                           check=True)
            self.addCleanup(subprocess.run, ['umount', '-l', export],
                            check=False)
        share = '127.0.0.1:%s' % export
        mount = os.path.join(self.mount_base,
                             hashlib.md5(share.encode(),
                                         usedforsecurity=False).hexdigest())
        os.makedirs(mount)
        subprocess.run(['mount', '--bind', export, mount], check=True)
        self.addCleanup(subprocess.run, ['umount', '-l', mount],
                        check=False)
        self.exports[name] = export
        shares = os.path.join(self.dir, name + '.shares')
        with open(shares, 'w') as out:
            out.write(share + '\n')
        return {name: {
            'volume_driver': 'cinder.volume.drivers.nfs.NfsDriver',
            'volume_backend_name': name,
            'nfs_shares_config': shares,
            'nfs_mount_point_base': self.mount_base,
            'nfs_sparsed_volumes': 'true',
            'nas_secure_file_operations': 'false',
            'nas_secure_file_permissions': 'false',
            'extra_capabilities': json.dumps({
                'multiattach': True,
                'backend_group': ('volmig-manager' if name in VOLMIG_BACKENDS
                                  else 'compute-api')})}}

    def request(self, method: str, path: str, session=None, **kwargs):
        """Cinder's API as Cinder's own service user (an admin), or as
        ``session``'s user, in that session's project."""
        session = session or self.session
        kwargs.setdefault('headers', {}).setdefault(
            'OpenStack-API-Version', 'volume 3.54')
        return session.request('http://127.0.0.1:%d/v3/%s%s' % (
            self.port, session.get_project_id(), path), method,
            raise_exc=False, **kwargs)

    def quota_held(self, project_id: str) -> dict:
        """What Cinder still holds of a project's quota: usages with a
        reservation and reservations never committed nor rolled back,
        read in Cinder's database."""
        with self._sql() as connection:
            usages = connection.execute(sa.text(
                'SELECT resource, reserved FROM quota_usages WHERE '
                'project_id = :p AND NOT deleted AND reserved != 0'),
                {'p': project_id}).all()
            reservations = connection.execute(sa.text(
                'SELECT resource, delta FROM reservations WHERE '
                'project_id = :p AND NOT deleted'),
                {'p': project_id}).all()
        return {'reserved': sorted(map(tuple, usages)),
                'reservations': sorted(map(tuple, reservations))}

    def lose_attachment(self, attachment_id: str) -> None:
        """The attachment deleted as Cinder's delete of a volume deletes
        the attachments it still has, and nothing else changed."""
        with self._sql() as connection:
            connection.execute(sa.text(
                'UPDATE volume_attachment SET deleted = true, '
                'deleted_at = now() WHERE id = :a'), {'a': attachment_id})

    @contextlib.contextmanager
    def _sql(self):
        """One transaction on Cinder's database, behind Cinder's back."""
        engine = sa.create_engine(self.db_url)
        try:
            with engine.begin() as connection:
                yield connection
        finally:
            engine.dispose()

    def api_ready(self) -> bool:
        return self.request('GET', '/types').ok

    def _pools_ready(self, count: int = len(BACKENDS)) -> bool:
        """Whether the scheduler has heard of ``count`` live pools."""
        answer = self.request('GET', '/scheduler-stats/get_pools')
        pools = answer.json().get('pools', []) if answer.ok else []
        return len(pools) >= count

    def _type(self, name: str, specs: dict) -> str:
        created = self.request('POST', '/types', json={'volume_type': {
            'name': name, 'extra_specs': specs}})
        created.raise_for_status()
        return created.json()['volume_type']['id']

    def volume(self, volume_id: str) -> dict:
        answer = self.request('GET', '/volumes/%s' % volume_id)
        answer.raise_for_status()
        return answer.json()['volume']

    def volume_file(self, volume: dict) -> str:
        """The file backing a volume, on whichever backend holds it."""
        backend = volume['os-vol-host-attr:host'].rpartition('#')[2]
        name_id = volume.get('os-vol-mig-status-attr:name_id') or volume[
            'id']
        return os.path.join(self.exports[backend], 'volume-%s' % name_id)

    def volmig_options(self) -> dict:
        """[volume] and [cinder] of a volmig deployment using this Cinder,
        and where its agents find the shares."""
        return {('volume', 'backend'): 'cinder',
                ('cinder', 'auth_type'): 'password',
                ('cinder', 'auth_url'): self.keystone.url,
                ('cinder', 'username'): 'volmig',
                ('cinder', 'password'): openstack.SERVICE_PASSWORD,
                ('cinder', 'user_domain_id'): 'default',
                ('cinder', 'project_name'): 'service',
                ('cinder', 'project_domain_id'): 'default',
                ('compute', 'nfs_mount_point_base'): self.mount_base}

"""Real Cinder (api, scheduler, volume) as processes, for the tests.

It runs from ``.venv-cinder`` on PostgreSQL and a RabbitMQ vhost of its
own, with two backends of its NFS driver. Each backend's share is a local
directory bind-mounted where os-brick looks for the share's mount
(``<mnt>/<md5 of the share>``), so no NFS is mounted; volmig's agents use
the same mount base. Cinder authenticates with Keystone
(``auth_strategy = keystone``).
"""

import hashlib
import os
import subprocess
import uuid

import fixtures
import sqlalchemy as sa

from tests import openstack
from tests.integration import cluster

BACKENDS = ('nfs-a', 'nfs-b')
PG_URL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'


class Cinder(openstack.Processes):
    """cinder-api, cinder-scheduler and cinder-volume, two NFS backends.

    ``compute_url`` is what Cinder calls for swaps and attachment checks:
    it is registered in Keystone's catalog as ``compute``.
    """

    def __init__(self, keystone: openstack.Keystone, compute_url: str):
        super().__init__()
        self.keystone = keystone
        self.compute_url = compute_url

    def _setUp(self):
        super()._setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.mount_base = os.path.join(self.dir, 'mnt')
        self.port = openstack.free_port()
        self.keystone.service_user('cinder')
        self.project_id = self.keystone.service_project
        self.url = 'http://127.0.0.1:%d/v3/%s' % (self.port, self.project_id)
        self.keystone.register('volumev3', 'http://127.0.0.1:%d/v3/'
                               '$(project_id)s' % self.port)
        self.keystone.register('compute', self.compute_url)
        vhost = self.useFixture(cluster.VhostFixture())
        db_url = self._database()
        self.exports = {}
        backends = {}
        for name in BACKENDS:
            backends.update(self._backend(name))
        conf = os.path.join(self.dir, 'cinder.conf')
        etc = os.path.join(openstack.CINDER_VENV, 'etc', 'cinder')
        auth = {'auth_url': self.keystone.url, 'auth_type': 'password',
                'username': 'cinder', 'password': openstack.SERVICE_PASSWORD,
                'user_domain_id': 'default', 'project_name': 'service',
                'project_domain_id': 'default'}
        openstack.ini(conf, dict({
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
                # Cinder copies detached volumes by itself through
                # os-brick; as root no helper is needed.
                'rootwrap_config': '/dev/null'},
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
                'helper_command': 'privsep-helper --config-file %s' % conf}},
            **backends))
        env = dict(os.environ, PATH='%s:%s' % (
            os.path.join(openstack.CINDER_VENV, 'bin'), os.environ['PATH']))
        binary = os.path.join(openstack.CINDER_VENV, 'bin')
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
        for name in BACKENDS:
            self.types[name] = self._type(name, name, multiattach=False)
            self.types[name + '-multi'] = self._type(name + '-multi', name,
                                                     multiattach=True)

    def errors(self) -> str:
        """The ERROR lines of every Cinder log, for a failure's message."""
        found = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith('.log'):
                with open(os.path.join(self.dir, name)) as log:
                    found += ['%s: %s' % (name, line.rstrip()[:300])
                              for line in log
                              if ' ERROR ' in line and ' DEBUG ' not in line
                              and 'Traceback' not in line]
        return '\n'.join(found[:12])

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

    def _backend(self, name: str) -> dict:
        export = os.path.join(self.dir, 'exports', name)
        os.makedirs(export)
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
            'extra_capabilities': '{"multiattach": true}'}}

    def request(self, method: str, path: str, **kwargs):
        kwargs.setdefault('headers', {}).setdefault(
            'OpenStack-API-Version', 'volume 3.54')
        return self.session.request(self.url + path, method,
                                    raise_exc=False, **kwargs)

    def api_ready(self) -> bool:
        return self.request('GET', '/types').ok

    def _pools_ready(self) -> bool:
        answer = self.request('GET', '/scheduler-stats/get_pools')
        pools = answer.json().get('pools', []) if answer.ok else []
        return len(pools) == len(BACKENDS)

    def _type(self, name: str, backend: str, multiattach: bool) -> str:
        specs = {'volume_backend_name': backend}
        if multiattach:
            specs['multiattach'] = '<is> True'
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

    def keystone_authtoken_options(self) -> dict:
        """volmig-api behind keystonemiddleware, on this Keystone."""
        return {('api', 'auth_strategy'): 'keystone',
                ('keystone_authtoken', 'www_authenticate_uri'):
                    self.keystone.url,
                ('keystone_authtoken', 'auth_url'): self.keystone.url,
                ('keystone_authtoken', 'auth_type'): 'password',
                ('keystone_authtoken', 'username'): 'volmig',
                ('keystone_authtoken', 'password'): openstack.SERVICE_PASSWORD,
                ('keystone_authtoken', 'user_domain_id'): 'default',
                ('keystone_authtoken', 'project_name'): 'service',
                ('keystone_authtoken', 'project_domain_id'): 'default',
                ('keystone_authtoken', 'service_token_roles_required'):
                    True}

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

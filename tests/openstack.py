"""Real Keystone and Cinder as processes, for the tests volmig serves them.

Each runs from its own venv (``tools/bootstrap.sh`` makes ``.venv-keystone``
and ``.venv-cinder``): their pins are not volmig's. Keystone runs under
gunicorn on SQLite with one worker; Cinder (api, scheduler, volume) on
PostgreSQL and a RabbitMQ vhost of its own, with two backends of its NFS
driver. Each backend's share is a local directory bind-mounted where
os-brick looks for the share's mount (``<mnt>/<md5 of the share>``), so
no NFS is mounted; volmig's agents use the same mount base.

Cinder authenticates with Keystone (``auth_strategy = keystone``), and
volmig sends a service token as Nova does, so Cinder treats its
attachment deletes as the compute service's.
"""

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid

import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
import sqlalchemy as sa

from tests.integration import cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYSTONE_VENV = os.path.join(ROOT, '.venv-keystone')
CINDER_VENV = os.path.join(ROOT, '.venv-cinder')
ADMIN_PASSWORD = 'admin-secret'
SERVICE_PASSWORD = 'service-secret'
BACKENDS = ('nfs-a', 'nfs-b')
PG_URL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'


def missing() -> str | None:
    """Why these tests cannot run here, or None."""
    for venv, binary in ((KEYSTONE_VENV, 'gunicorn'),
                         (CINDER_VENV, 'cinder-api')):
        if not os.path.exists(os.path.join(venv, 'bin', binary)):
            return '%s has no %s: run tools/bootstrap.sh' % (venv, binary)
    if os.geteuid() != 0:
        return 'bind-mounting the NFS shares needs root'
    if not shutil.which('mount.nfs'):
        return "Cinder's NFS driver needs mount.nfs (nfs-common)"
    try:
        socket.create_connection(('127.0.0.1', 5432), timeout=2).close()
    except OSError:
        return 'Cinder needs PostgreSQL on 127.0.0.1:5432'
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _ini(path: str, sections: dict) -> None:
    with open(path, 'w') as out:
        for name, values in sections.items():
            out.write('[%s]\n' % name)
            for key, value in values.items():
                out.write('%s = %s\n' % (key, value))
            out.write('\n')


def wait_for(what: str, check, timeout: float = 90, process=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError('%s exited with %s' % (what,
                                                     process.returncode))
        try:
            result = check()
        except Exception:
            result = None
        if result:
            return result
        time.sleep(0.3)
    raise RuntimeError('%s is not ready after %d s' % (what, timeout))


class _Processes(fixtures.Fixture):

    def _setUp(self):
        self.processes: dict = {}
        self._commands: dict = {}
        self.addCleanup(self._stop_all)

    def spawn(self, name: str, argv: list, log_dir: str, **kwargs):
        log = open(os.path.join(log_dir, name + '.log'), 'ab')
        self.addCleanup(log.close)
        self._commands[name] = (argv, log_dir, kwargs)
        self.processes[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, **kwargs)
        return self.processes[name]

    def stop(self, name: str) -> None:
        """Stop a process and the workers it forked."""
        process = self.processes[name]
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)

    def start(self, name: str):
        """Start a stopped process again, as it first ran."""
        argv, log_dir, kwargs = self._commands[name]
        return self.spawn(name, argv, log_dir, **kwargs)

    def _stop_all(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Keystone(_Processes):
    """A bootstrapped Keystone with a ``service`` project and users."""

    def _setUp(self):
        super()._setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d/v3' % self.port
        conf = os.path.join(self.dir, 'keystone.conf')
        keys = {name: os.path.join(self.dir, name)
                for name in ('fernet-keys', 'credential-keys')}
        for path in keys.values():
            os.mkdir(path, 0o700)
        _ini(conf, {
            'DEFAULT': {'log_file': os.path.join(self.dir, 'keystone.log')},
            'database': {'connection': 'sqlite:///%s/keystone.db'
                         % self.dir},
            'token': {'provider': 'fernet'},
            'fernet_tokens': {'key_repository': keys['fernet-keys']},
            'fernet_receipts': {'key_repository': keys['fernet-keys']},
            'credential': {'key_repository': keys['credential-keys']},
            # Test-only: a token in a fifth of the time.
            'identity': {'password_hash_rounds': 4},
            'resource': {'admin_project_name': 'admin',
                         'admin_project_domain_name': 'Default'}})
        manage = [os.path.join(KEYSTONE_VENV, 'bin', 'keystone-manage'),
                  '--config-file', conf]
        for args in (['db_sync'],
                     ['fernet_setup', '--keystone-user', 'root',
                      '--keystone-group', 'root'],
                     ['credential_setup', '--keystone-user', 'root',
                      '--keystone-group', 'root'],
                     ['bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
                      '--bootstrap-region-id', 'RegionOne',
                      '--bootstrap-public-url', self.url,
                      '--bootstrap-internal-url', self.url,
                      '--bootstrap-admin-url', self.url]):
            subprocess.run(manage + args, check=True, capture_output=True,
                           timeout=120)
        # Keystone's config parses sys.argv: gunicorn takes no arguments
        # and reads gunicorn.conf.py from its working directory.
        with open(os.path.join(self.dir, 'gunicorn.conf.py'), 'w') as out:
            out.write('wsgi_app = "keystone.wsgi.api:application"\n'
                      'bind = "127.0.0.1:%d"\nworkers = 1\ntimeout = 120\n'
                      'control_socket_disable = True\n'
                      'raw_env = ["OS_KEYSTONE_CONFIG_FILES=%s"]\n'
                      % (self.port, conf))
        process = self.spawn('keystone', [os.path.join(
            KEYSTONE_VENV, 'bin', 'gunicorn')], self.dir, cwd=self.dir)
        self.admin = self.session('admin', ADMIN_PASSWORD, 'admin')
        wait_for('Keystone', lambda: self.admin.get_token(), process=process)
        self.service_project = self._create('projects', {
            'name': 'service', 'domain_id': 'default'})['id']
        self.roles = {role['name']: role['id'] for role in self.admin.get(
            '/roles', endpoint_filter=self._identity).json()['roles']}

    _identity = {'service_type': 'identity', 'interface': 'public'}

    def session(self, user: str, password: str,
                project: str) -> ks_session.Session:
        return ks_session.Session(auth=v3.Password(
            auth_url=self.url, username=user, password=password,
            user_domain_id='default', project_name=project,
            project_domain_id='default'))

    def _create(self, kind: str, body: dict) -> dict:
        singular = kind[:-1]
        return self.admin.post('/%s' % kind, json={singular: body},
                               endpoint_filter=self._identity
                               ).json()[singular]

    def service_user(self, name: str) -> dict:
        """A user with the admin and service roles in ``service``."""
        user = self._create('users', {'name': name, 'domain_id': 'default',
                                      'password': SERVICE_PASSWORD})
        for role in ('admin', 'service'):
            self.admin.put('/projects/%s/users/%s/roles/%s' % (
                self.service_project, user['id'], self.roles[role]),
                endpoint_filter=self._identity)
        return user

    def register(self, service_type: str, url: str) -> None:
        """An endpoint in the catalog, as an operator registers one."""
        service = self._create('services', {'type': service_type,
                                            'name': service_type})
        self._create('endpoints', {'service_id': service['id'],
                                   'interface': 'public', 'url': url,
                                   'region_id': 'RegionOne'})


class Cinder(_Processes):
    """cinder-api, cinder-scheduler and cinder-volume, two NFS backends.

    ``compute_url`` is what Cinder calls for swaps and attachment checks:
    it is registered in Keystone's catalog as ``compute``.
    """

    def __init__(self, keystone: Keystone, compute_url: str):
        super().__init__()
        self.keystone = keystone
        self.compute_url = compute_url

    def _setUp(self):
        super()._setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.mount_base = os.path.join(self.dir, 'mnt')
        self.port = free_port()
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
        auth = {'auth_url': self.keystone.url, 'auth_type': 'password',
                'username': 'cinder', 'password': SERVICE_PASSWORD,
                'user_domain_id': 'default', 'project_name': 'service',
                'project_domain_id': 'default'}
        _ini(conf, dict({
            'DEFAULT': {
                'auth_strategy': 'keystone', 'debug': 'true',
                'transport_url': vhost.url,
                'osapi_volume_listen': '127.0.0.1',
                'osapi_volume_listen_port': self.port,
                'osapi_volume_workers': 1,
                'api_paste_config': os.path.join(
                    CINDER_VENV, 'etc', 'cinder', 'api-paste.ini'),
                'resource_query_filters_file': os.path.join(
                    CINDER_VENV, 'etc', 'cinder', 'resource_filters.json'),
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
                service_token_roles_required='true',
                token_cache_time='-1'),
            'nova': dict(auth, token_auth_url=self.keystone.url,
                         interface='public'),
            'oslo_concurrency': {'lock_path': os.path.join(self.dir,
                                                           'locks')},
            'privsep': {'helper_command': 'privsep-helper'}},
            **backends))
        env = dict(os.environ, PATH='%s:%s' % (
            os.path.join(CINDER_VENV, 'bin'), os.environ['PATH']))
        binary = os.path.join(CINDER_VENV, 'bin')
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
        self.session = self.keystone.session('cinder', SERVICE_PASSWORD,
                                             'service')
        try:
            wait_for('cinder-volume with both backends', self._pools_ready,
                     timeout=40, process=self.processes['cinder-volume'])
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
                ('keystone_authtoken', 'password'): SERVICE_PASSWORD,
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
                ('cinder', 'password'): SERVICE_PASSWORD,
                ('cinder', 'user_domain_id'): 'default',
                ('cinder', 'project_name'): 'service',
                ('cinder', 'project_domain_id'): 'default',
                ('compute', 'nfs_mount_point_base'): self.mount_base}

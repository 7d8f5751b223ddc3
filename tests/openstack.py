"""OpenStack services as processes, for the tests volmig serves them:
what they share, and Keystone (``tests.cinder_deployment`` has Cinder).

Each runs from its own venv (``tools/bootstrap.sh`` makes ``.venv-keystone``
and ``.venv-cinder``): their pins are not volmig's. Keystone runs under
gunicorn on SQLite with one worker.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYSTONE_VENV = os.path.join(ROOT, '.venv-keystone')
CINDER_VENV = os.path.join(ROOT, '.venv-cinder')
ADMIN_PASSWORD = 'admin-secret'
SERVICE_PASSWORD = 'service-secret'


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


def ini(path: str, sections: dict) -> None:
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


class Processes(fixtures.Fixture):

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

    def serve(self, name: str, venv: str, app: str, port: int,
              work_dir: str, **env: str):
        """A WSGI application of ``venv`` under its gunicorn, one worker,
        configured by ``env``. The OpenStack applications parse
        sys.argv, so gunicorn takes no arguments: it reads
        gunicorn.conf.py from a working directory of the application's
        own."""
        run_dir = os.path.join(work_dir, name + '-gunicorn')
        os.mkdir(run_dir)
        with open(os.path.join(run_dir, 'gunicorn.conf.py'), 'w') as out:
            out.write('wsgi_app = %r\nbind = "127.0.0.1:%d"\nworkers = 1\n'
                      'timeout = 120\ncontrol_socket_disable = True\n'
                      'raw_env = %r\n' % (app, port, [
                          '%s=%s' % item for item in env.items()]))
        return self.spawn(name, [os.path.join(venv, 'bin', 'gunicorn')],
                          work_dir, cwd=run_dir)

    def stop(self, name: str) -> None:
        """Stop a process and the workers it forked."""
        process = self.processes[name]
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)

    def freeze(self, name: str) -> None:
        """SIGSTOP a process and its workers where they are."""
        self._signal(self.processes[name], signal.SIGSTOP)

    def kill(self, name: str) -> None:
        """SIGKILL a process and the workers it forked, as a crash."""
        process = self.processes[name]
        self._signal(process, signal.SIGKILL)
        process.wait(timeout=30)

    def start(self, name: str):
        """Start a stopped process again, as it first ran."""
        argv, log_dir, kwargs = self._commands[name]
        return self.spawn(name, argv, log_dir, **kwargs)

    def _stop_all(self):
        # Each runs in a session of its own: its forked workers (one per
        # backend, per API worker) go with it.
        for process in self.processes.values():
            self._signal(process, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._signal(process, signal.SIGKILL)
                process.wait()
            self._signal(process, signal.SIGKILL)

    @staticmethod
    def _signal(process, sig) -> None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


class Keystone(Processes):
    """A bootstrapped Keystone with a ``service`` project and users.

    ``token_expiration``: seconds a token lives (Keystone's default is an
    hour).
    """

    def __init__(self, token_expiration: int | None = None):
        super().__init__()
        self.token_expiration = token_expiration

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
        ini(conf, {
            'DEFAULT': {'log_file': os.path.join(self.dir, 'keystone.log')},
            'database': {'connection': 'sqlite:///%s/keystone.db'
                         % self.dir},
            'token': dict({'provider': 'fernet'}, **(
                {'expiration': self.token_expiration}
                if self.token_expiration else {})),
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
        process = self.serve('keystone', KEYSTONE_VENV,
                             'keystone.wsgi.api:application', self.port,
                             self.dir, OS_KEYSTONE_CONFIG_FILES=conf)
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
        return self.user(name, self.service_project, ('admin', 'service'))

    def project(self, name: str) -> str:
        return self._create('projects', {'name': name,
                                          'domain_id': 'default'})['id']

    def user(self, name: str, project_id: str, roles) -> dict:
        """A user with ``roles`` in a project; password SERVICE_PASSWORD."""
        user = self._create('users', {'name': name, 'domain_id': 'default',
                                      'password': SERVICE_PASSWORD})
        for role in roles:
            self.admin.put('/projects/%s/users/%s/roles/%s' % (
                project_id, user['id'], self.roles[role]),
                endpoint_filter=self._identity)
        return user

    def access(self, user: str, project_id: str):
        """A token of ``user`` scoped to the project, with its expiry
        (keystoneauth's AccessInfo)."""
        auth = v3.Password(
            auth_url=self.url, username=user, password=SERVICE_PASSWORD,
            user_domain_id='default', project_id=project_id)
        return auth.get_access(ks_session.Session(auth=auth))

    def token(self, user: str, project_id: str) -> str:
        """A token of ``user`` scoped to the project."""
        return self.access(user, project_id).auth_token

    def authtoken_options(self, user: str = 'volmig') -> dict:
        """volmig-api behind keystonemiddleware, on this Keystone, as
        ``user`` (made by ``service_user``)."""
        return {('api', 'auth_strategy'): 'keystone',
                ('keystone_authtoken', 'www_authenticate_uri'): self.url,
                ('keystone_authtoken', 'auth_url'): self.url,
                ('keystone_authtoken', 'auth_type'): 'password',
                ('keystone_authtoken', 'username'): user,
                ('keystone_authtoken', 'password'): SERVICE_PASSWORD,
                ('keystone_authtoken', 'user_domain_id'): 'default',
                ('keystone_authtoken', 'project_name'): 'service',
                ('keystone_authtoken', 'project_domain_id'): 'default',
                ('keystone_authtoken', 'service_token_roles_required'):
                    True}

    def register(self, service_type: str, url: str) -> None:
        """An endpoint in the catalog, as an operator registers one."""
        service = self._create('services', {'type': service_type,
                                            'name': service_type})
        self._create('endpoints', {'service_id': service['id'],
                                   'interface': 'public', 'url': url,
                                   'region_id': 'RegionOne'})

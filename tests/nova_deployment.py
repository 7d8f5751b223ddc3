"""Real Nova (api, conductor, scheduler, compute on libvirt) and placement
as processes, for the tests of a Nova cloud.

They run from ``.venv-nova`` on PostgreSQL and a RabbitMQ vhost of their
own, with the Keystone and Cinder of ``tests.openstack`` and
``tests.cinder_deployment``. nova-compute drives this machine's libvirtd
(TCG); servers boot from Cinder volumes with no network and no image, and
a stub answers Nova's few questions to Neutron.

Nova's NFS volume driver mounts an export unless its mount point is a
mount already (``os.path.ismount``), and unmounts it when the last volume
there disconnects. Here each export is on a file system of its own (the
Cinder fixture's ``own_fs``), bind-mounted at Nova's mount point several
times over: a bind mount of a directory on the same file system is no
mount to ``ismount``, and each unmount of Nova's takes one layer.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import urllib.request

import fixtures
from oslo_utils import uuidutils

from tests import fixtures as volmig_fixtures
from tests import libvirt_daemon
from tests import openstack
from tests.integration import cluster

NOVA_VENV = os.path.join(openstack.ROOT, '.venv-nova')
PG = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'
MICROVERSION = '2.95'
FLAVOR = 'volmig.tiny'
# Layers of bind mounts at each of Nova's mount points.
LAYERS = 40


def missing() -> str | None:
    """Why Nova cannot run here, or None."""
    if not os.path.exists(os.path.join(NOVA_VENV, 'bin', 'nova-compute')):
        return '%s has no nova-compute: run tools/bootstrap.sh' % NOVA_VENV
    return openstack.missing() or libvirt_daemon.unavailable()


class Nova(openstack.Processes):
    """placement, nova-api, -conductor, -scheduler and -compute.

    ``port``: where nova-api listens, which Cinder's catalog names as
    ``compute`` already (``cinder_deployment.Cinder``'s ``compute_url``).
    """

    def __init__(self, keystone: openstack.Keystone, cinder, port: int,
                 host: str):
        """``host``: the compute host's name, which volmig's agent there
        has as well."""
        super().__init__()
        self.keystone = keystone
        self.cinder = cinder
        self.port = port
        self.host = host
        self.url = 'http://127.0.0.1:%d/v2.1' % port

    def _setUp(self):
        super()._setUp()
        self.useFixture(libvirt_daemon.Libvirtd())
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.mount_base = os.path.join(self.dir, 'mnt')
        self.instances = os.path.join(self.dir, 'instances')
        # libvirt's QEMU user walks down to the instances and mounts,
        # whatever the test's umask made of them.
        for path in (self.instances, self.mount_base):
            os.makedirs(path)
            os.chmod(path, 0o755)
        os.chmod(self.dir, 0o755)
        # libvirt's names of this deployment's guests: a guest that an
        # earlier run left behind has a name of its own, and goes at the
        # end with the rest.
        self.prefix = 'nova-%s-' % uuidutils.generate_uuid()[:8]
        self.addCleanup(self._destroy_guests)
        for export in self.cinder.exports.values():
            self._mount(export)
        self.env = dict(os.environ, PATH='%s:%s' % (
            os.path.join(NOVA_VENV, 'bin'), os.environ['PATH']))
        for user in ('nova', 'placement'):
            self.keystone.service_user(user)
        placement_port = openstack.free_port()
        self.keystone.register('placement',
                               'http://127.0.0.1:%d' % placement_port)
        neutron_port = openstack.free_port()
        self.spawn('neutron-stub', [sys.executable, '-m',
                                    'tests.neutron_stub', str(neutron_port)],
                   self.dir, cwd=openstack.ROOT)
        self._placement(placement_port)
        vhost = self.useFixture(cluster.VhostFixture())
        databases = {name: self._database('nova_%s' % name)
                     for name in ('api', 'cell0', 'main')}
        auth = self._auth('nova')
        common = {
            'DEFAULT': {
                'debug': 'true', 'transport_url': vhost.url,
                'host': self.host,
                'state_path': self.dir, 'instances_path': self.instances,
                'compute_driver': 'libvirt.LibvirtDriver',
                'my_ip': '127.0.0.1', 'graceful_shutdown_timeout': 10,
                'instance_name_template': self.prefix + '%08x'},
            'api': {'auth_strategy': 'keystone'},
            'keystone_authtoken': dict(
                auth, www_authenticate_uri=self.keystone.url,
                service_token_roles_required='true'),
            'placement': dict(auth, region_name='RegionOne'),
            'cinder': dict(auth, os_region_name='RegionOne'),
            'service_user': dict(auth, send_service_user_token='true'),
            'neutron': dict(auth, region_name='RegionOne',
                            endpoint_override='http://127.0.0.1:%d'
                            % neutron_port),
            # An image URL goes into notifications even with no image:
            # it names a port where nothing listens, and nothing calls it.
            'glance': {'api_servers': 'http://127.0.0.1:%d'
                       % openstack.free_port()},
            'libvirt': {'virt_type': 'qemu', 'cpu_mode': 'none',
                        'nfs_mount_point_base': self.mount_base},
            'vnc': {'enabled': 'false'},
            'oslo_concurrency': {'lock_path': os.path.join(self.dir,
                                                           'locks')},
            'conductor': {'workers': 1},
            'scheduler': {'workers': 1}}
        # Root already: privsep's helpers start without sudo.
        for section in ('privsep', 'privsep_osbrick', 'nova_sys_admin'):
            common[section] = {'helper_command': 'privsep-helper '
                               '--config-file %s'
                               % os.path.join(self.dir, 'nova-compute.conf')}
        # nova-compute refuses a configuration with a database in it.
        openstack.ini(os.path.join(self.dir, 'nova-compute.conf'), common)
        self.conf = os.path.join(self.dir, 'nova.conf')
        openstack.ini(self.conf, dict(
            common, api_database={'connection': databases['api']},
            database={'connection': databases['main']}))
        shutil.copy(os.path.join(NOVA_VENV, 'etc', 'nova', 'api-paste.ini'),
                    self.dir)
        for args in (['api_db', 'sync'],
                     ['cell_v2', 'map_cell0', '--database_connection',
                      databases['cell0']],
                     ['cell_v2', 'create_cell', '--name', 'cell1'],
                     ['db', 'sync']):
            self.manage(*args)
        for service in ('nova-conductor', 'nova-scheduler'):
            self.spawn(service, [self.binary(service), '--config-file',
                                 self.conf], self.dir, env=self.env)
        self.start_compute()
        self.serve('nova-api', NOVA_VENV,
                   'nova.wsgi.osapi_compute:application', self.port,
                   self.dir, OS_NOVA_CONFIG_DIR=self.dir)
        self.admin = self.keystone.session(
            'nova', openstack.SERVICE_PASSWORD, 'service')
        openstack.wait_for('nova-api', lambda: self.request(
            'GET', '/flavors').ok, process=self.processes['nova-api'])
        # nova-compute takes 20-30 s to register on an idle machine.
        openstack.wait_for('nova-compute in a cell', self._discovered,
                           timeout=300,
                           process=self.processes['nova-compute'])
        created = self.request('POST', '/flavors', json={'flavor': {
            'name': FLAVOR, 'ram': 192, 'vcpus': 1, 'disk': 0}})
        created.raise_for_status()
        self.flavor = created.json()['flavor']['id']

    def _destroy_guests(self) -> None:
        import libvirt
        connection = libvirt.open(libvirt_daemon.URI)
        try:
            for domain in connection.listAllDomains():
                if domain.name().startswith(self.prefix):
                    if domain.isActive():
                        domain.destroy()
                    domain.undefine()
        finally:
            connection.close()

    def start_compute(self) -> None:
        self.spawn('nova-compute', [
            self.binary('nova-compute'), '--config-file',
            os.path.join(self.dir, 'nova-compute.conf')], self.dir,
            env=self.env)

    def binary(self, name: str) -> str:
        return os.path.join(NOVA_VENV, 'bin', name)

    def _auth(self, user: str) -> dict:
        return {'auth_url': self.keystone.url, 'auth_type': 'password',
                'username': user, 'password': openstack.SERVICE_PASSWORD,
                'user_domain_id': 'default', 'project_name': 'service',
                'project_domain_id': 'default'}

    def _database(self, prefix: str) -> str:
        url, drop = volmig_fixtures.create_database(PG, prefix)
        self.addCleanup(drop)
        return url

    def _placement(self, port: int) -> None:
        conf_dir = os.path.join(self.dir, 'placement')
        os.mkdir(conf_dir)
        conf = os.path.join(conf_dir, 'placement.conf')
        openstack.ini(conf, {
            'DEFAULT': {'debug': 'true'},
            'api': {'auth_strategy': 'keystone'},
            'keystone_authtoken': dict(
                self._auth('placement'),
                www_authenticate_uri=self.keystone.url),
            'placement_database': {
                'connection': self._database('placement')}})
        subprocess.run([self.binary('placement-manage'), '--config-file',
                        conf, 'db', 'sync'], check=True, capture_output=True,
                       timeout=180, env=self.env)
        process = self.serve('placement', NOVA_VENV,
                             'placement.wsgi.api:application', port,
                             self.dir, OS_PLACEMENT_CONFIG_DIR=conf_dir)
        # Its root lists its versions to anyone.
        openstack.wait_for('placement', lambda: urllib.request.urlopen(
            'http://127.0.0.1:%d/' % port, timeout=5).status == 200,
            process=process)

    def mount_of(self, export: str) -> str:
        """Where Nova has a Cinder export mounted."""
        share = '127.0.0.1:%s' % export
        return os.path.join(self.mount_base, hashlib.md5(
            share.encode(), usedforsecurity=False).hexdigest())

    def _mount(self, export: str) -> None:
        mount = self.mount_of(export)
        os.makedirs(mount)
        os.chmod(export, 0o755)
        for _ in range(LAYERS):
            subprocess.run(['mount', '--bind', export, mount], check=True)
        self.addCleanup(self._unmount, mount)

    @staticmethod
    def _unmount(mount: str) -> None:
        while os.path.ismount(mount):
            if subprocess.run(['umount', '-l', mount]).returncode:
                return

    def manage(self, *args: str) -> str:
        """``nova-manage`` on the controller's configuration."""
        done = subprocess.run([self.binary('nova-manage'), '--config-file',
                               self.conf, *args], capture_output=True,
                              text=True, timeout=180, env=self.env)
        if done.returncode:
            raise RuntimeError('nova-manage %s: %s%s' % (
                ' '.join(args), done.stdout[-1500:], done.stderr[-1500:]))
        return done.stdout

    def _discovered(self) -> bool:
        self.manage('cell_v2', 'discover_hosts')
        answer = self.request('GET', '/os-hypervisors')
        return answer.ok and bool(answer.json()['hypervisors'])

    def request(self, method: str, path: str, session=None, **kwargs):
        """Nova's API as its own service user (an admin), or as
        ``session``'s user."""
        kwargs.setdefault('headers', {}).setdefault(
            'OpenStack-API-Version', 'compute %s' % MICROVERSION)
        return (session or self.admin).request(
            self.url + path, method, raise_exc=False, **kwargs)

    def boot(self, volume_id: str, session, name: str | None = None
             ) -> dict:
        """A server of ``session``'s user that boots from the volume, with
        no network; returns it as Nova shows it once it is ACTIVE."""
        answer = self.request('POST', '/servers', session, json={'server': {
            'name': name or 'server-%s' % uuidutils.generate_uuid()[:8],
            'flavorRef': self.flavor, 'networks': 'none',
            'block_device_mapping_v2': [{
                'boot_index': 0, 'uuid': volume_id, 'source_type': 'volume',
                'destination_type': 'volume',
                'delete_on_termination': False}]}})
        if answer.status_code != 202:
            raise RuntimeError('boot: %s %s' % (answer.status_code,
                                                answer.text))
        return self.wait_for_status(answer.json()['server']['id'], 'ACTIVE')

    def server(self, server_id: str) -> dict:
        answer = self.request('GET', '/servers/%s' % server_id)
        answer.raise_for_status()
        return answer.json()['server']

    def wait_for_status(self, server_id: str, status: str,
                        timeout: float = 180) -> dict:
        def reached():
            server = self.server(server_id)
            if server['status'] == 'ERROR' or (
                    server['status'] == status
                    and not server.get('OS-EXT-STS:task_state')):
                return server
            return None
        server = openstack.wait_for('server %s to be %s' % (server_id,
                                                           status),
                                    reached, timeout=timeout)
        if server['status'] != status:
            raise RuntimeError('server %s is %s: %s; nova-compute said: %s'
                               % (server_id, server['status'],
                                  server.get('fault'), self.errors()))
        return server

    def errors(self) -> str:
        """The ERROR lines of nova-compute's log, for a failure's
        message."""
        with open(os.path.join(self.dir, 'nova-compute.log'),
                  errors='replace') as log:
            return "\n".join(line.rstrip()[:1500] for line in log
                             if ' ERROR ' in line)[-3000:]

    def console_log(self, server_id: str) -> str:
        """What the server's serial console printed, from the log Nova's
        libvirt keeps for it."""
        path = os.path.join(self.instances, server_id, 'console.log')
        with open(path, errors='replace') as log:
            return log.read()

"""Rolling upgrade from the previous release, with real older code.

The previous release (compute and conductor RPC 1.3, alias 2027.1) is
taken from this repository's history (``git archive``) and run from the
current virtualenv with ``PYTHONPATH`` pointing at it: its endpoints
really are 1.3, not a newer agent announcing an old number.
"""

import configparser
import os
import signal
import subprocess

import fixtures
import oslo_messaging as messaging
from testtools import content

from tests import nbd_writer as guest_io
from tests.integration import test_qemu_data_path
from volmig import exception
from volmig import rpc
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conf import CONF

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
# The last commit of the 2027.1 code: the one before compute RPC 1.4.
PREVIOUS_RELEASE = '2a799d7^'
# What an upgraded agent announces.
NEW = compute_rpcapi.RPC_API_VERSION


def previous_release_tree(into: str) -> str | None:
    """The previous release's volmig package under ``into``, or None when
    this checkout has no history to take it from."""
    archive = subprocess.run(['git', '-C', ROOT, 'archive', PREVIOUS_RELEASE,
                              'volmig'], capture_output=True, timeout=120)
    if archive.returncode:
        return None
    subprocess.run(['tar', '-x', '-C', into], input=archive.stdout,
                   check=True, timeout=120)
    _install_metadata(into)
    return into


def _install_metadata(into: str) -> None:
    """The previous release's own entry points, as its installed package
    has them: a process that finds this distribution first on its path
    loads its plugins (the block-storage adapters, the compute drivers)
    from their old modules, not from this release's metadata."""
    setup_cfg = subprocess.run(
        ['git', '-C', ROOT, 'show', PREVIOUS_RELEASE + ':setup.cfg'],
        capture_output=True, check=True, timeout=60).stdout.decode()
    parser = configparser.ConfigParser()
    parser.read_string(setup_cfg)
    dist_info = os.path.join(into, 'volmig-0.0.0.dist-info')
    os.makedirs(dist_info)
    with open(os.path.join(dist_info, 'METADATA'), 'w') as metadata:
        metadata.write('Metadata-Version: 2.1\nName: volmig\n'
                       'Version: 0.0.0\n')
    with open(os.path.join(dist_info, 'entry_points.txt'), 'w') as points:
        for group, lines in parser['entry_points'].items():
            points.write('[%s]\n%s\n\n' % (group, lines.strip()))


class PreviousReleaseTestCase(test_qemu_data_path.QemuTestCase):
    """Qemu agents on compute-1 and compute-2; ``OLD`` processes run the
    previous release."""

    COMPUTES = 2
    OLD: tuple[str, ...] = ()

    def prefixes(self):
        tree = previous_release_tree(
            self.useFixture(fixtures.TempDir()).path)
        if tree is None:
            self.skipTest('no git history to take %s from'
                          % PREVIOUS_RELEASE)
        self.old = ['env', 'PYTHONPATH=%s' % tree]
        return {name: self.old for name in self.OLD}

    def options(self):
        # This process is a client of the deployment too: it takes the
        # unsealed answers of the previous release's services meanwhile.
        return {**super().options(), ('signing', 'allow_unsigned'): True}

    def unkeyed(self):
        # The previous release signs nothing: its hosts hold no key until
        # they are upgraded, as the upgrade notes say.
        return self.OLD

    def process_options(self):
        # Each host its own state, as on real hosts: the previous
        # release's agent adopts every guest under its state_path.
        options = super().process_options()
        for host in self.hosts:
            options.setdefault(host, {})[('compute', 'state_path')] = \
                os.path.join(self.state_path, host)
        # The previous release signs nothing: the new services serve it
        # while the upgrade runs, as the upgrade notes say.
        for name in ['conductor', 'api', 'volume'] + self.hosts:
            if name not in self.OLD:
                options.setdefault(name, {})[
                    ('signing', 'allow_unsigned')] = True
        return options

    def guest_dir(self, server):
        for host in self.hosts:
            path = os.path.join(self.state_path, host, 'guests',
                                server['uuid'])
            if os.path.isdir(path):
                return path
        return path

    def kill_guests(self):
        for host in self.hosts:
            guests = os.path.join(self.state_path, host, 'guests')
            for uuid in (os.listdir(guests) if os.path.isdir(guests)
                         else []):
                pid = self.qemu_pid({'uuid': uuid})
                if pid:
                    os.kill(pid, signal.SIGKILL)

    def writer(self, server, vol):
        writer = guest_io.GuestWriter(
            guest_io.nbd_socket(os.path.join(self.state_path,
                                             server['host']),
                                server['uuid']), vol['id'])
        self.addCleanup(writer.close)
        return writer

    def _migrate_on(self, host):
        vol = self.volumes.create_volume(self.admin,
                                         test_qemu_data_path.SIZE_MB,
                                         pool='pool-a')
        [server] = self.conductor.build_instances(
            self.user, 'vm', [{'volume_id': vol['id'], 'boot_index': 0}], 1,
            host)
        server = self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        bdm = server['block_devices'][0]
        writer = self.writer(server, vol)
        number = self.write_some(writer, 30)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 20, number)
        return server, bdm, vol, writer, number, migration

    def _complete(self, run):
        self.complete_exactly(*run)

    def _version(self, host, binary='volmig-compute'):
        [record] = [s for s in self.conductor.service_get_all(
            self.admin, binary) if s['host'] == host]
        return record['version']

    def _upgrade(self, name):
        self.cluster.give_key(name)
        process = self.cluster.restart(name, prefix=[])

        def keep_log():
            if os.path.exists(process.log_path):
                with open(process.log_path) as log:
                    self.addDetail('%s-upgraded.log' % name,
                                   content.text_content(log.read()))
        self.addCleanup(keep_log)


class RollingUpgradeTest(PreviousReleaseTestCase):

    OLD = ('compute-1', 'compute-2')

    def test_agents_upgraded_one_by_one_during_migrations(self):
        self.assertEqual(['1.3', '1.3'], [self._version(h)
                                          for h in ('compute-1',
                                                    'compute-2')])
        first = self._migrate_on('compute-1')
        second = self._migrate_on('compute-2')
        self._upgrade('compute-1')
        self.wait_until(lambda: self._version('compute-1') == NEW,
                        what='compute-1 to run the new code')
        # A new agent beside an old one; each finishes its migration.
        self._complete(first)
        self._upgrade('compute-2')
        self.wait_until(lambda: self._version('compute-2') == NEW,
                        what='compute-2 to run the new code')
        self._complete(second)
        # Every service is new: unsigned messages are refused again.
        self.cluster.restart('conductor', options={
            ('signing', 'allow_unsigned'): False})
        unsigned = messaging.get_rpc_client(
            messaging.get_rpc_transport(
                CONF, allowed_remote_exmods=rpc.ALLOWED_EXMODS),
            messaging.Target(exchange=rpc.EXCHANGE, topic='volmig-conductor',
                             version='1.0'),
            serializer=rpc.RequestContextSerializer(), timeout=30)
        error = self.wait_until(lambda: _refused(
            lambda: unsigned.call(self.admin, 'service_get_all',
                                  binary=None)),
            what='the restarted conductor to answer')
        self.assertIn('unsigned', str(error))
        # The agents' heartbeats went unanswered while the conductor was
        # away: it counts them down until each has been heard again.
        self.cluster.wait_until_registered()
        self._complete(self._migrate_on('compute-1'))


def _refused(call):
    """The refusal ``call`` raises, or None while nobody answers."""
    try:
        call()
    except exception.MessageRefused as exc:
        return exc
    except messaging.MessagingTimeout:
        return None
    raise AssertionError('an unsigned call was served')


class OldConductorTest(PreviousReleaseTestCase):
    """New agents under the previous release's conductor."""

    OLD = ('conductor',)

    def test_new_agents_under_an_old_conductor(self):
        [conductor] = self.conductor.service_get_all(self.admin,
                                                     'volmig-conductor')
        self.assertEqual('1.3', conductor['version'])
        self.assertEqual([NEW, NEW], [self._version(h)
                                          for h in ('compute-1',
                                                    'compute-2')])
        self._complete(self._migrate_on('compute-1'))
        self._complete(self._migrate_on('compute-2'))

"""Gabbi fixtures: real volmig services in this process, on fake://.

Each YAML file under ``gabbits`` runs against a fresh database, conductor,
API, volmig-volume (two pools of real files) and fake compute agents;
requests go straight to the WSGI app through wsgi-intercept.
"""

import fixtures
from gabbi import fixture

from tests import fixtures as volmig_fixtures
from volmig import service
from volmig.api.rest import app
from volmig.conf import CONF
from volmig.volume_service import manager as storage_manager

POOLS = ('pool-a', 'pool-b')


def setup_app():
    """The app, built per request: wsgi-intercept asks for it before a
    story's fixture has configured volmig."""
    return lambda environ, start_response: app.build()(environ,
                                                       start_response)


class APIFixture(fixture.GabbiFixture):
    """The embedded default: file volumes, fake guests."""

    COMPUTE_HOSTS: tuple[str, ...] = ('compute-1', 'compute-2')

    def start_fixture(self):
        self._fixtures = fixtures.Fixture()
        self._fixtures.setUp()
        use = self._fixtures.useFixture
        conf = use(volmig_fixtures.ConfFixture())
        use(volmig_fixtures.DatabaseFixture())
        use(volmig_fixtures.RPCFixture())
        use(volmig_fixtures.PolicyFixture())
        pools = use(fixtures.TempDir()).path
        conf.conf(auth_strategy='noauth2', group='api')
        conf.conf(backend='file', group='volume')
        conf.conf(pools={pool: '%s/%s' % (pools, pool) for pool in POOLS},
                  group='storage')
        self.configure(conf.conf)
        self._services = []
        for binary, host in ([(service.CONDUCTOR, 'conductor-host'),
                              (service.VOLUME, 'volume-host'),
                              (service.API, 'api-host')]
                             + [(service.COMPUTE, host)
                                for host in self.COMPUTE_HOSTS]):
            server = service.Service(binary, host=host)
            server.start()
            self._services.append(server)

    def configure(self, conf):
        """Hook for variants."""

    def stop_fixture(self):
        volmig_fixtures.stop_services(self._services)
        self._fixtures.cleanUp()
        CONF.reset()


class UsedVolumesFixture(APIFixture):
    """Each new volume holds data in every byte, as a used one does: its
    copy takes the time its bandwidth gives it (a new volume is a hole,
    and a hole is not read, so it copies at once at any bandwidth)."""

    def configure(self, conf):
        create = storage_manager.FileVolumes.create_file_volume

        def create_used(volumes, ctxt, size_mb, *args, **kwargs):
            volume = create(volumes, ctxt, size_mb, *args, **kwargs)
            # A migration's dst must read as zeros, as the copy expects.
            if not kwargs.get('migration_source'):
                with open(volume['path'], 'r+b') as data:
                    data.write(b'\x5a' * (size_mb * 1024 * 1024))
            return volume
        self._fixtures.useFixture(fixtures.MonkeyPatch(
            'volmig.volume_service.manager.FileVolumes.create_file_volume',
            create_used))


class OldComputeFixture(APIFixture):
    """One agent that announces compute RPC 1.0, as before an upgrade."""

    COMPUTE_HOSTS = ('compute-old',)

    def configure(self, conf):
        conf(announced_rpc_version='1.0', group='compute')


class OfflineOnlyFixture(APIFixture):
    """An agent whose driver can only migrate shut-off guests."""

    COMPUTE_HOSTS = ('compute-1',)

    def configure(self, conf):
        conf(offline_only=True, group='fake_driver')


class SmallPagesFixture(APIFixture):
    """Lists two items at a time unless asked for fewer."""

    def configure(self, conf):
        conf(max_limit=2, group='api')

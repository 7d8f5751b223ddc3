"""Client side of the compute agent's RPC API.

Its versions, and what each added, are in
``doc/source/rpc_api_version_history.rst``.
"""

from collections.abc import Callable

from oslo_log import log as logging
from oslo_utils import versionutils

from volmig import exception
from volmig import rpc
from volmig.conf import CONF

LOG = logging.getLogger(__name__)

# The agent's binary name, which is also its RPC topic.
BINARY = TOPIC = 'volmig-compute'
RPC_API_VERSION = '1.6'
READONLY_ATTACH_VERSION = '1.1'
SWAP_VERSION = '1.2'
OWNER_VERSION = '1.3'
CONSOLE_VERSION = '1.4'
COPY_VERSION = '1.5'
CHECK_VERSION = '1.6'

# Release names an operator may put in [upgrade_levels] compute.
VERSION_ALIASES = {
    '2026.1': '1.0',
    '2026.2': '1.2',
    '2027.1': '1.3',
}


def _cap_from_config(min_version_lookup: Callable[[], str | None]):
    cap = CONF.upgrade_levels.compute
    if cap == 'auto':
        return min_version_lookup()
    return VERSION_ALIASES.get(cap, cap)


class ComputeAPI:
    """Casts and calls to the compute agent on one host.

    ``min_version_lookup`` returns the lowest version announced by the
    registered compute agents (or None if none is registered yet); it is
    used when ``[upgrade_levels] compute = auto``.
    """

    def __init__(self, min_version_lookup: Callable[[], str | None]):
        self._min_version_lookup = min_version_lookup
        self._client = None

    @property
    def client(self):
        if self._client is None:
            cap = _cap_from_config(self._min_version_lookup)
            if cap is None:
                # No agent registered yet: do not pin a guess; look again
                # next time.
                return rpc.get_client(TOPIC, RPC_API_VERSION,
                                      version_cap=RPC_API_VERSION)
            LOG.info('Compute RPC version cap is %s', cap)
            self._client = rpc.get_client(TOPIC, RPC_API_VERSION,
                                          version_cap=cap)
        return self._client

    def can_send_version(self, version: str,
                         host_version: str | None = None) -> bool:
        """Whether the cap, and the target agent if known, accept version."""
        if not self.client.can_send_version(version):
            return False
        return host_version is None or versionutils.is_compatible(
            version, host_version, same_major=True)

    def _prepare(self, host: str, version: str, timeout: int | None = None):
        return self.client.prepare(server=host, version=version,
                                   timeout=timeout)

    def _readonly_version(self, host: str, host_version: str | None,
                          modes) -> str:
        """The version to send, refusing "ro" to an agent that lacks it."""
        if self.can_send_version(READONLY_ATTACH_VERSION, host_version):
            return READONLY_ATTACH_VERSION
        if 'ro' in modes:
            raise exception.ComputeTooOld(host=host,
                                          feature='read-only attachments',
                                          needed=READONLY_ATTACH_VERSION)
        return '1.0'

    def build_instance(self, ctxt, host, instance, block_devices,
                       host_version=None):
        version = self._readonly_version(
            host, host_version, [bdm['attach_mode'] for bdm in block_devices])
        self._prepare(host, version).cast(
            ctxt, 'build_instance', instance=instance,
            block_devices=block_devices)

    def terminate_instance(self, ctxt, host, instance):
        self._prepare(host, '1.0').cast(ctxt, 'terminate_instance',
                                        instance=instance)

    def stop_instance(self, ctxt, host, instance):
        self._prepare(host, '1.0').cast(ctxt, 'stop_instance',
                                        instance=instance)

    def start_instance(self, ctxt, host, instance, block_devices):
        self._prepare(host, '1.0').cast(ctxt, 'start_instance',
                                        instance=instance,
                                        block_devices=block_devices)

    def attach_volume(self, ctxt, host, instance, bdm, host_version=None):
        version = self._readonly_version(host, host_version,
                                         [bdm['attach_mode']])
        kwargs = {'instance': instance, 'bdm': bdm}
        if version == READONLY_ATTACH_VERSION:
            kwargs['attach_mode'] = bdm['attach_mode']
        return self._prepare(host, version).call(ctxt, 'attach_volume',
                                                 **kwargs)

    def get_console_output(self, ctxt, host, instance, length=None):
        if not self.can_send_version(CONSOLE_VERSION):
            raise exception.ComputeTooOld(host=host, feature='console output',
                                          needed=CONSOLE_VERSION)
        return self._prepare(host, CONSOLE_VERSION).call(
            ctxt, 'get_console_output', instance=instance, length=length)

    def detach_volume(self, ctxt, host, instance, bdm):
        self._prepare(host, '1.0').cast(ctxt, 'detach_volume',
                                        instance=instance, bdm=bdm)

    def migration_start(self, ctxt, host, migration, bdm):
        version = (OWNER_VERSION if self.can_send_version(OWNER_VERSION)
                   else '1.0')
        return self._prepare(host, version).call(
            ctxt, 'migration_start', migration=migration, bdm=bdm)

    def migration_reconcile(self, ctxt, host, migration, bdm,
                            dst_connection_info):
        if not self.can_send_version(OWNER_VERSION):
            LOG.warning('Not asking the agent on %s to reconcile volume '
                        'migration %s: it is older than compute RPC %s',
                        host, migration['id'], OWNER_VERSION)
            return
        self._prepare(host, OWNER_VERSION).cast(
            ctxt, 'migration_reconcile', migration=migration, bdm=bdm,
            dst_connection_info=dst_connection_info)

    def migration_cancel(self, ctxt, host, migration, bdm):
        self._prepare(host, '1.0').cast(ctxt, 'migration_cancel',
                                        migration=migration, bdm=bdm)

    def migration_complete(self, ctxt, host, migration, bdm,
                           dst_connection_info):
        self._prepare(host, '1.0').cast(
            ctxt, 'migration_complete', migration=migration, bdm=bdm,
            dst_connection_info=dst_connection_info)

    def swap_volume(self, ctxt, host, instance, old_bdm, new_bdm):
        self._prepare(host, SWAP_VERSION).cast(
            ctxt, 'swap_volume', instance=instance, old_bdm=old_bdm,
            new_bdm=new_bdm)

    def _at_least(self, host: str, version: str, feature: str) -> str:
        """``version``, or a refusal naming ``feature`` if the cap is
        below it."""
        if not self.can_send_version(version):
            raise exception.ComputeTooOld(host=host, feature=feature,
                                          needed=version)
        return version

    def _copy_version(self, host: str) -> str:
        return self._at_least(host, COPY_VERSION,
                              'copies for Cinder migrations')

    def volume_copy(self, ctxt, host, copy_id, src_connection_info,
                    dst_connection_info):
        self._prepare(host, self._copy_version(host)).cast(
            ctxt, 'volume_copy', copy_id=copy_id,
            src_connection_info=src_connection_info,
            dst_connection_info=dst_connection_info)

    def volume_copy_status(self, ctxt, host, copy_id) -> dict:
        return self._prepare(host, self._copy_version(host)).call(
            ctxt, 'volume_copy_status', copy_id=copy_id)

    def _check_version(self, host: str) -> str:
        return self._at_least(host, CHECK_VERSION,
                              'checks of a drain of Cinder')

    def nova_disk(self, ctxt, host, server_id, volume_id) -> str | None:
        """The file libvirt on ``host`` has as Nova's server's disk of the
        volume."""
        return self._prepare(host, self._check_version(host)).call(
            ctxt, 'nova_disk', server_id=server_id, volume_id=volume_id)

    def volume_checksum(self, ctxt, host, copy_id, connection_info):
        """Hash a volume connected on ``host``; ``volume_copy_status``
        has its checksum once done."""
        self._prepare(host, self._check_version(host)).cast(
            ctxt, 'volume_checksum', copy_id=copy_id,
            connection_info=connection_info)

"""Client side of the conductor's RPC API.

Its versions, and what each added, are in
``doc/source/rpc_api_version_history.rst``.
"""

from oslo_log import log as logging

from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import states
from volmig.conductor import paging
from volmig.conf import CONF

LOG = logging.getLogger(__name__)

BINARY = TOPIC = 'volmig-conductor'
OPERATOR_TOPIC = 'volmig-conductor-operator'
RPC_API_VERSION = '1.9'
OWNER_VERSION = '1.3'
GUESTS_VERSION = '1.4'
OPERATIONS_VERSION = '1.5'
OPERATOR_TOPIC_VERSION = '1.6'
LEASE_VERSION = '1.7'
PAGES_VERSION = '1.8'
DRAINS_VERSION = '1.9'

# Release names an operator may put in [upgrade_levels] conductor.
VERSION_ALIASES = {
    '2026.1': '1.0',
    '2026.2': '1.2',
    '2027.1': '1.3',
}


class ConductorAPI:
    """Calls to the conductor, capped by ``[upgrade_levels] conductor``:
    what every service may ask and report (the controllers' own calls are
    ``volmig.conductor.operator_rpcapi.OperatorAPI``'s).

    ``auto`` asks the conductors (any version answers) for the lowest
    version they announce, once, on first use.
    """

    def __init__(self, timeout: int | None = None):
        self._timeout = timeout
        self._client = None

    @property
    def client(self):
        if self._client is None:
            cap = CONF.upgrade_levels.conductor
            if cap == 'auto':
                probe = rpc.get_client(TOPIC, RPC_API_VERSION,
                                       timeout=self._timeout)
                cap = probe.prepare(version='1.0').call(
                    volmig_context.get_admin_context(),
                    'service_min_version', binary=BINARY)
                if cap is None:
                    # No conductor registered yet: do not pin a guess.
                    return probe
            cap = VERSION_ALIASES.get(cap, cap)
            LOG.info('Conductor RPC version cap is %s', cap)
            self._client = rpc.get_client(TOPIC, RPC_API_VERSION,
                                          version_cap=cap,
                                          timeout=self._timeout)
        return self._client

    def can_send_version(self, version: str) -> bool:
        # Until a conductor has registered its version, the client is an
        # uncapped probe and the conductor answering may be of any
        # release: nothing newer than 1.0 is asked of it.
        client = self.client
        return self._client is not None and client.can_send_version(version)

    def _call(self, ctxt, method, **kwargs):
        return self.client.prepare(version='1.0').call(ctxt, method, **kwargs)

    # Services.

    def service_update(self, ctxt, binary, host, topic, version,
                       capabilities):
        # A heartbeat older than the next one is worthless: do not wait
        # longer than the interval (nor for a conductor not yet up). It
        # needs no cap, so it never asks for one.
        return rpc.get_client(TOPIC, RPC_API_VERSION).prepare(
            version='1.0', timeout=CONF.report_interval).call(
                ctxt, 'service_update', binary=binary, host=host,
                topic=topic, version=version, capabilities=capabilities)

    def _page(self, ctxt, method: str, key: str, old: dict, page: dict,
              keep=lambda item: True) -> list:
        """A page of a list (``page``: its filters, ``limit`` and
        ``marker``, the ``key`` of the item before it). A conductor older
        than 1.8 is asked for the whole list (``old``: its 1.0
        arguments), and the page is cut from it here."""
        if self.can_send_version(PAGES_VERSION):
            return self.client.prepare(version=PAGES_VERSION).call(
                ctxt, method, **old, **page)
        return paging.cut([item for item in self._call(ctxt, method, **old)
                           if keep(item)], key, page['limit'], page['marker'])

    def service_get_all(self, ctxt, binary=None, host=None, limit=None,
                        marker=None):
        return self._page(ctxt, 'service_get_all', 'id', {'binary': binary},
                          {'host': host, 'limit': limit, 'marker': marker},
                          lambda service: host in (None, service['host']))

    def service_min_version(self, ctxt, binary):
        return self._call(ctxt, 'service_min_version', binary=binary)

    # Instances: what users ask for.

    def _guests_version(self, what: str) -> str:
        if not self.can_send_version(GUESTS_VERSION):
            raise exception.ServiceTooOld(service=BINARY, feature=what,
                                          needed=GUESTS_VERSION)
        return GUESTS_VERSION

    def build_instances(self, ctxt, name, block_devices, count=1, host=None,
                        image_ref=None):
        if image_ref is None:
            return self._call(ctxt, 'build_instances', name=name,
                              block_devices=block_devices, count=count,
                              host=host)
        return self.client.prepare(
            version=self._guests_version('imageRef')).call(
                ctxt, 'build_instances', name=name,
                block_devices=block_devices, count=count, host=host,
                image_ref=image_ref)

    def instance_console_output(self, ctxt, instance_uuid, length=None):
        return self.client.prepare(
            version=self._guests_version('console output')).call(
                ctxt, 'instance_console_output',
                instance_uuid=instance_uuid, length=length)

    def instance_get(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_get', instance_uuid=instance_uuid)

    def instance_list(self, ctxt, host=None, name=None, limit=None,
                      marker=None):
        """Servers, only ``host``'s where the conductor can filter."""
        if name or limit is not None or marker is not None:
            return self._page(
                ctxt, 'instance_list', 'uuid', {},
                {'host': host, 'name': name, 'limit': limit,
                 'marker': marker},
                lambda server: (host in (None, server['host'])
                                and (name or '') in server['name']))
        if host and self.can_send_version(GUESTS_VERSION):
            return self.client.prepare(version=GUESTS_VERSION).call(
                ctxt, 'instance_list', host=host)
        return self._call(ctxt, 'instance_list')

    def stop_instance(self, ctxt, instance_uuid):
        return self._call(ctxt, 'stop_instance', instance_uuid=instance_uuid)

    def start_instance(self, ctxt, instance_uuid):
        return self._call(ctxt, 'start_instance', instance_uuid=instance_uuid)

    def attach_volume(self, ctxt, instance_uuid, volume_id, attach_mode='rw'):
        return self._call(ctxt, 'attach_volume', instance_uuid=instance_uuid,
                          volume_id=volume_id, attach_mode=attach_mode)

    def detach_volume(self, ctxt, instance_uuid, volume_id):
        return self._call(ctxt, 'detach_volume', instance_uuid=instance_uuid,
                          volume_id=volume_id)

    def swap_volume(self, ctxt, instance_uuid, old_volume_id,
                    new_volume_id):
        return self.client.prepare(version='1.2').call(
            ctxt, 'swap_volume', instance_uuid=instance_uuid,
            old_volume_id=old_volume_id, new_volume_id=new_volume_id)

    # Instances: what compute agents report.

    def volume_swapped(self, ctxt, instance_uuid, old_bdm, new_bdm):
        return self.client.prepare(version='1.2').call(
            ctxt, 'volume_swapped', instance_uuid=instance_uuid,
            old_bdm=old_bdm, new_bdm=new_bdm)

    def swap_failed(self, ctxt, instance_uuid, new_bdm):
        return self.client.prepare(version='1.2').call(
            ctxt, 'swap_failed', instance_uuid=instance_uuid,
            new_bdm=new_bdm)

    def instance_power_changed(self, ctxt, instance_uuid, power_state,
                               vm_state):
        """A stop or start ended, or the guest stopped by itself."""
        if self.can_send_version(OWNER_VERSION):
            return self.client.prepare(version=OWNER_VERSION).call(
                ctxt, 'instance_power_changed', instance_uuid=instance_uuid,
                power_state=power_state, vm_state=vm_state)
        return self._call(ctxt, 'instance_update',
                          instance_uuid=instance_uuid, values={
                              'power_state': power_state,
                              'vm_state': vm_state, 'task_state': None})

    def instance_build_failed(self, ctxt, instance_uuid, reason=None):
        if self.can_send_version(GUESTS_VERSION):
            return self.client.prepare(version=GUESTS_VERSION).call(
                ctxt, 'instance_build_failed', instance_uuid=instance_uuid,
                reason=reason)
        if self.can_send_version(OWNER_VERSION):
            return self.client.prepare(version=OWNER_VERSION).call(
                ctxt, 'instance_build_failed', instance_uuid=instance_uuid)
        return self._call(ctxt, 'instance_update',
                          instance_uuid=instance_uuid, values={
                              'vm_state': states.VM_ERROR,
                              'task_state': None})

    def instance_built(self, ctxt, instance_uuid, power_state):
        return self._call(ctxt, 'instance_built', instance_uuid=instance_uuid,
                          power_state=power_state)

    def instance_terminated(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_terminated',
                          instance_uuid=instance_uuid)

    def volume_detached(self, ctxt, instance_uuid, volume_id):
        return self._call(ctxt, 'volume_detached',
                          instance_uuid=instance_uuid, volume_id=volume_id)

    def volume_detach_failed(self, ctxt, instance_uuid, volume_id, reason):
        """The guest kept the volume. An older conductor cannot hear it:
        then the task stays until an operator resets the server."""
        if not self.can_send_version(GUESTS_VERSION):
            LOG.error('Detaching volume %(volume)s from server %(server)s '
                      'failed (%(reason)s), and the conductor is too old to '
                      'be told', {'volume': volume_id,
                                  'server': instance_uuid, 'reason': reason})
            return None
        return self.client.prepare(version=GUESTS_VERSION).call(
            ctxt, 'volume_detach_failed', instance_uuid=instance_uuid,
            volume_id=volume_id, reason=reason)

    # Volume migrations: what the API asks for.

    def migration_begin(self, ctxt, src_attachment_id, starting=False,
                        owner=None):
        if starting and self.can_send_version(LEASE_VERSION):
            return self.client.prepare(version=LEASE_VERSION).call(
                ctxt, 'migration_begin', src_attachment_id=src_attachment_id,
                starting=True, owner=owner)
        if starting and self.can_send_version(OWNER_VERSION):
            return self.client.prepare(version=OWNER_VERSION).call(
                ctxt, 'migration_begin', src_attachment_id=src_attachment_id,
                starting=True)
        return self._call(ctxt, 'migration_begin',
                          src_attachment_id=src_attachment_id)

    def migration_started(self, ctxt, migration, pauses):
        """Record what the agent's start returned."""
        if self.can_send_version(OWNER_VERSION):
            return self.client.prepare(version=OWNER_VERSION).call(
                ctxt, 'migration_started', migration_id=migration['id'],
                pauses=pauses)
        self._set_status(ctxt, migration['id'], states.STARTING)
        return self._set_status(ctxt, migration['id'], states.STARTED,
                                pauses)

    def migration_release(self, ctxt, migration_id):
        """The caller stopped waiting on the agent's start."""
        if self.can_send_version(LEASE_VERSION):
            self.client.prepare(version=LEASE_VERSION).call(
                ctxt, 'migration_release', migration_id=migration_id)

    def migration_accept_cancel(self, ctxt, src_attachment_id):
        return self._call(ctxt, 'migration_accept_cancel',
                          src_attachment_id=src_attachment_id)

    def migration_accept_complete(self, ctxt, src_attachment_id,
                                  dst_attachment_id):
        return self._call(ctxt, 'migration_accept_complete',
                          src_attachment_id=src_attachment_id,
                          dst_attachment_id=dst_attachment_id)

    def migration_get(self, ctxt, migration_ref):
        return self._call(ctxt, 'migration_get', migration_ref=migration_ref)

    def migration_list(self, ctxt, filters, limit=None, marker=None):
        return self._page(ctxt, 'migration_list', 'id', {'filters': filters},
                          {'limit': limit, 'marker': marker})

    # Volume migrations: what compute agents report.

    def _set_status(self, ctxt, migration_id, status, pauses=None):
        """The only report of conductors older than 1.3."""
        if not pauses:
            return self._call(ctxt, 'migration_set_status',
                              migration_id=migration_id, status=status)
        return self.client.prepare(version='1.1').call(
            ctxt, 'migration_set_status', migration_id=migration_id,
            status=status, pauses=pauses)

    def migration_switched(self, ctxt, migration_id, pauses):
        """The guest is on dst; src may be released."""
        if self.can_send_version(OWNER_VERSION):
            return self.client.prepare(version=OWNER_VERSION).call(
                ctxt, 'migration_switched', migration_id=migration_id,
                pauses=pauses)
        self._set_status(ctxt, migration_id, states.SRC_RELEASED, pauses)
        return self._set_status(ctxt, migration_id, states.COMMITTING)

    def migration_job_ended(self, ctxt, migration_id, status, pauses):
        """The migration's job ended it in ``status``."""
        if self.can_send_version(OWNER_VERSION):
            return self.client.prepare(version=OWNER_VERSION).call(
                ctxt, 'migration_job_ended', migration_id=migration_id,
                status=status, pauses=pauses)
        return self._set_status(ctxt, migration_id, status, pauses)

    def migration_recovered(self, ctxt, migration_id, side):
        """A failed migration's guest is whole again on ``side``."""
        return self.client.prepare(version=OWNER_VERSION).call(
            ctxt, 'migration_recovered', migration_id=migration_id,
            side=side)

    def migration_work_for_host(self, ctxt, host, uptime=None):
        """What an agent starting up must reconcile (empty before 1.3).

        ``uptime``: seconds the agent has run. What changed since is
        being driven by requests the agent is serving, not left behind.
        """
        if not self.can_send_version(OWNER_VERSION):
            return []
        if self.can_send_version(OPERATIONS_VERSION):
            return self.client.prepare(version=OPERATIONS_VERSION).call(
                ctxt, 'migration_work_for_host', host=host, uptime=uptime)
        return self.client.prepare(version=OWNER_VERSION).call(
            ctxt, 'migration_work_for_host', host=host)

    def migration_report_progress(self, ctxt, migration_id, bytes_done,
                                  bytes_total):
        return self._call(ctxt, 'migration_report_progress',
                          migration_id=migration_id, bytes_done=bytes_done,
                          bytes_total=bytes_total)

    def migration_fail(self, ctxt, migration_id, reason, recovery_needed):
        return self._call(ctxt, 'migration_fail', migration_id=migration_id,
                          reason=reason, recovery_needed=recovery_needed)

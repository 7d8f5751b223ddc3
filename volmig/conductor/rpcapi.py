"""Client side of the conductor's RPC API.

API version history:

    1.0 - Initial version.
    1.1 - migration_set_status takes pauses: the guest I/O pauses, in
          milliseconds, of the driver steps that led to the status.
    1.2 - swap_volume, volume_swapped and swap_failed: the legacy swap.
"""

from volmig import rpc
from volmig.conf import CONF

TOPIC = 'volmig-conductor'
RPC_API_VERSION = '1.2'


class ConductorAPI:

    def __init__(self, timeout: int | None = None):
        self.client = rpc.get_client(TOPIC, RPC_API_VERSION, timeout=timeout)

    def _call(self, ctxt, method, **kwargs):
        return self.client.prepare(version='1.0').call(ctxt, method, **kwargs)

    # Services.

    def service_update(self, ctxt, binary, host, topic, version,
                       capabilities):
        # A heartbeat older than the next one is worthless: do not wait
        # longer than the interval (nor for a conductor not yet up).
        return self.client.prepare(
            version='1.0', timeout=CONF.report_interval).call(
                ctxt, 'service_update', binary=binary, host=host,
                topic=topic, version=version, capabilities=capabilities)

    def service_get_all(self, ctxt, binary=None):
        return self._call(ctxt, 'service_get_all', binary=binary)

    def service_min_version(self, ctxt, binary):
        return self._call(ctxt, 'service_min_version', binary=binary)

    # Instances: what users ask for.

    def build_instances(self, ctxt, name, block_devices, count=1, host=None):
        return self._call(ctxt, 'build_instances', name=name,
                          block_devices=block_devices, count=count, host=host)

    def instance_get(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_get', instance_uuid=instance_uuid)

    def instance_list(self, ctxt):
        return self._call(ctxt, 'instance_list')

    def stop_instance(self, ctxt, instance_uuid):
        return self._call(ctxt, 'stop_instance', instance_uuid=instance_uuid)

    def start_instance(self, ctxt, instance_uuid):
        return self._call(ctxt, 'start_instance', instance_uuid=instance_uuid)

    def delete_instance(self, ctxt, instance_uuid):
        return self._call(ctxt, 'delete_instance',
                          instance_uuid=instance_uuid)

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

    def instance_update(self, ctxt, instance_uuid, values):
        return self._call(ctxt, 'instance_update',
                          instance_uuid=instance_uuid, values=values)

    def instance_built(self, ctxt, instance_uuid, power_state):
        return self._call(ctxt, 'instance_built', instance_uuid=instance_uuid,
                          power_state=power_state)

    def instance_terminated(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_terminated',
                          instance_uuid=instance_uuid)

    def volume_detached(self, ctxt, instance_uuid, volume_id):
        return self._call(ctxt, 'volume_detached',
                          instance_uuid=instance_uuid, volume_id=volume_id)

    # Volume migrations: what the API asks for.

    def migration_begin(self, ctxt, src_attachment_id):
        return self._call(ctxt, 'migration_begin',
                          src_attachment_id=src_attachment_id)

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

    def migration_list(self, ctxt, filters):
        return self._call(ctxt, 'migration_list', filters=filters)

    # Volume migrations: what compute agents report.

    def migration_set_status(self, ctxt, migration_id, status, pauses=None):
        if not pauses:
            return self._call(ctxt, 'migration_set_status',
                              migration_id=migration_id, status=status)
        return self.client.prepare(version='1.1').call(
            ctxt, 'migration_set_status', migration_id=migration_id,
            status=status, pauses=pauses)

    def migration_report_progress(self, ctxt, migration_id, bytes_done,
                                  bytes_total):
        return self._call(ctxt, 'migration_report_progress',
                          migration_id=migration_id, bytes_done=bytes_done,
                          bytes_total=bytes_total)

    def migration_fail(self, ctxt, migration_id, reason, recovery_needed):
        return self._call(ctxt, 'migration_fail', migration_id=migration_id,
                          reason=reason, recovery_needed=recovery_needed)

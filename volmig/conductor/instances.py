"""The conductor's side of servers and their volume attachments.

Requests are validated by ``rules``, recorded, and then sent to the
compute agent on the instance's host. Whatever was created before a
failure is undone, so a refusal leaves nothing half-done.
"""

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from volmig import exception
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import rules
from volmig.conductor import services
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import locks
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)


def _device_name(index: int) -> str:
    return '/dev/vd' + chr(ord('a') + index)


class InstanceConductor:

    def __init__(self, volume_api, compute_api: compute_rpcapi.ComputeAPI):
        self.volume_api = volume_api
        self.compute_api = compute_api

    # Reads.

    def get(self, ctxt, instance_uuid: str) -> dict:
        instance = instances_db.instance_get(ctxt, instance_uuid)
        instance['block_devices'] = instances_db.bdm_get_all(
            ctxt, instance_uuid=instance_uuid)
        return instance

    def get_all(self, ctxt, host: str | None = None, **page) -> list[dict]:
        """Servers with their mappings; ``page``: ``name``, ``limit``,
        ``marker`` (``instances_db.instance_get_all``)."""
        project_id = None if ctxt.is_admin else ctxt.project_id
        found = instances_db.instance_get_all(ctxt, host=host,
                                              project_id=project_id, **page)
        by_instance: dict[str, list] = {i['uuid']: [] for i in found}
        # The page's mappings only: every server's cost a list its size.
        for bdm in instances_db.bdm_get_all(ctxt, list(by_instance)):
            by_instance.get(bdm['instance_uuid'], []).append(bdm)
        for instance in found:
            instance['block_devices'] = by_instance[instance['uuid']]
        return found

    # Placement.

    def _choose_host(self, ctxt, host: str | None) -> dict:
        if host:
            service = service_db.get(ctxt, compute_rpcapi.BINARY, host)
            if not services.service_is_up(service):
                raise exception.NoValidHost(
                    reason='the agent on host %s is down' % host)
            if service['disabled']:
                raise exception.NoValidHost(
                    reason='compute host %s is disabled (%s)' % (
                        host, service['disabled_reason'] or 'no reason'))
            return service
        service = service_db.least_loaded(ctxt, compute_rpcapi.BINARY,
                                          services.up_since())
        if service is None:
            raise exception.NoValidHost(
                reason='no enabled compute agent is up')
        return service

    def _check_readonly(self, service: dict, modes) -> None:
        if 'ro' in modes:
            rules.check_compute_version(
                service['host'], 'read-only attachments',
                compute_rpcapi.READONLY_ATTACH_VERSION,
                self.compute_api.can_send_version(
                    compute_rpcapi.READONLY_ATTACH_VERSION,
                    service['version']))

    def connect(self, ctxt, instance: dict, volume: dict,
                 attach_mode: str) -> dict:
        """A new attachment, connected to the instance's host.

        Its connection info says whether the volume is multiattach, as
        Nova's does: the hypervisor lets other writers share only such a
        volume.
        """
        attachment = self.volume_api.attachment_create(
            ctxt, volume['id'], instance['uuid'], attach_mode)
        try:
            attachment = self.volume_api.attachment_update(
                ctxt, attachment['id'],
                services.connector(ctxt, instance['host'], attach_mode))
        except Exception:
            self.volume_api.attachment_delete(ctxt, attachment['id'])
            raise
        attachment['connection_info'] = dict(
            attachment['connection_info'],
            multiattach=bool(volume.get('multiattach')))
        return attachment

    def _attach_records(self, ctxt, instance: dict, volume: dict,
                        attach_mode: str, index: int,
                        boot_index: int | None) -> dict:
        attachment = self.connect(ctxt, instance, volume, attach_mode)
        try:
            return instances_db.bdm_create(ctxt, {
                'instance_uuid': instance['uuid'], 'volume_id': volume['id'],
                'attachment_id': attachment['id'],
                'attach_mode': attach_mode,
                'device_name': _device_name(index),
                'boot_index': boot_index,
                'connection_info': attachment['connection_info']})
        except Exception:
            self.volume_api.attachment_delete(ctxt, attachment['id'])
            raise

    def _discard(self, ctxt, instance_uuid: str) -> None:
        for bdm in instances_db.bdm_get_all(ctxt, instance_uuid=instance_uuid):
            self.volume_api.attachment_delete(ctxt, bdm['attachment_id'])
        instances_db.instance_destroy(ctxt, instance_uuid)

    # Servers.

    def build(self, ctxt, name: str, block_devices: list[dict], count: int,
              host: str | None, image_ref: str | None = None) -> list[dict]:
        rules.check_block_devices(block_devices)
        # Guests have no local disks: only volumes are attached.
        block_devices = [bd for bd in block_devices
                         if bd.get('destination_type', 'volume') == 'volume']
        volumes = [self.volume_api.get_volume(ctxt, bd['volume_id'])
                   for bd in block_devices]
        rules.check_multi_create(count, volumes)
        for volume in volumes:
            rules.check_can_attach(volume, db.migrations_in_progress(
                ctxt, volume['id']))
        modes = [bd.get('attach_mode', 'rw') for bd in block_devices]
        service = self._choose_host(ctxt, host)
        self._check_readonly(service, modes)

        built = []
        try:
            for number in range(count):
                instance = instances_db.instance_create(ctxt, {
                    'uuid': uuidutils.generate_uuid(),
                    'name': name if count == 1 else '%s-%d' % (name,
                                                               number + 1),
                    'project_id': ctxt.project_id, 'user_id': ctxt.user_id,
                    'host': service['host'], 'vm_state': states.VM_BUILDING,
                    'power_state': states.POWER_NOSTATE,
                    'image_ref': image_ref})
                built.append(instance)
                instance['block_devices'] = [
                    self._attach_records(ctxt, instance, volume, mode, index,
                                         bd.get('boot_index'))
                    for index, (bd, volume, mode) in enumerate(
                        zip(block_devices, volumes, modes, strict=True))]
            # Recorded, then checked, as an attach does.
            for volume in volumes:
                rules.check_can_attach(volume, locks.attach_check(
                    ctxt, volume['id'])['migrations'])
        except Exception:
            for instance in built:
                self._discard(ctxt, instance['uuid'])
            raise
        for instance in built:
            self.compute_api.build_instance(
                ctxt, service['host'], instance, instance['block_devices'],
                host_version=service['version'])
        LOG.info('Building %(count)d server(s) %(name)s on %(host)s',
                 {'count': count, 'name': name, 'host': service['host']})
        return built

    def built(self, ctxt, instance_uuid: str, power_state: str) -> dict:
        for bdm in instances_db.bdm_get_all(ctxt, instance_uuid=instance_uuid):
            self.volume_api.attachment_complete(ctxt, bdm['attachment_id'])
        return instances_db.instance_update(ctxt, instance_uuid, {
            'vm_state': states.VM_ACTIVE, 'power_state': power_state})

    def power_changed(self, ctxt, instance_uuid: str, power_state: str,
                      vm_state: str) -> dict:
        """A stop or start ended, or the guest went down by itself.

        A power task ends here; a migration's lock is the migration's.
        """
        instance = instances_db.instance_get(ctxt, instance_uuid)
        values: dict = {'power_state': power_state, 'vm_state': vm_state}
        if instance['task_state'] in (states.TASK_POWERING_OFF,
                                      states.TASK_POWERING_ON):
            values['task_state'] = None
        return instances_db.instance_update(ctxt, instance_uuid, values)

    def build_failed(self, ctxt, instance_uuid: str,
                     reason: str | None = None) -> dict:
        return instances_db.instance_update(ctxt, instance_uuid, dict(
            self._fault(reason), vm_state=states.VM_ERROR, task_state=None))

    @staticmethod
    def _fault(message: str | None) -> dict:
        if not message:
            return {}
        return {'fault_message': message, 'fault_at': timeutils.utcnow()}

    def begin_task(self, ctxt, instance_uuid: str, action: str,
                    task_state: str) -> dict:
        instance = instances_db.instance_get(ctxt, instance_uuid)
        rules.check_instance_idle(instance, action)
        try:
            return instances_db.instance_update(ctxt, instance_uuid,
                                                {'task_state': task_state},
                                                expected_task_state=None)
        except exception.InstanceInvalidState as exc:
            raise exception.InstanceInvalidState(
                action=action, instance_uuid=instance_uuid,
                task_state=exc.kwargs['task_state'])

    def stop(self, ctxt, instance_uuid: str) -> dict:
        instance = self.begin_task(ctxt, instance_uuid, 'stop',
                                    states.TASK_POWERING_OFF)
        self.compute_api.stop_instance(ctxt, instance['host'], instance)
        return instance

    def start(self, ctxt, instance_uuid: str) -> dict:
        instance = self.begin_task(ctxt, instance_uuid, 'start',
                                    states.TASK_POWERING_ON)
        self.compute_api.start_instance(
            ctxt, instance['host'], instance,
            instances_db.bdm_get_all(ctxt, instance_uuid=instance_uuid))
        return instance

    def delete(self, ctxt, instance_uuid: str) -> dict:
        instance = self.begin_task(ctxt, instance_uuid, 'delete',
                                    states.TASK_DELETING)
        self.compute_api.terminate_instance(ctxt, instance['host'], instance)
        return instance

    def console_output(self, ctxt, instance_uuid: str,
                       length: int | None) -> str:
        instance = instances_db.instance_get(ctxt, instance_uuid)
        return self.compute_api.get_console_output(
            ctxt, instance['host'], instance, length)

    def terminated(self, ctxt, instance_uuid: str) -> None:
        self._discard(ctxt, instance_uuid)

    # Attachments.

    def attach_volume(self, ctxt, instance_uuid: str, volume_id: str,
                      attach_mode: str) -> dict:
        rules.check_attach_mode(attach_mode)
        instance = instances_db.instance_get(ctxt, instance_uuid)
        volume = self.volume_api.get_volume(ctxt, volume_id)
        if any(a['instance_uuid'] == instance_uuid
               for a in volume['attachments']):
            raise exception.Invalid(reason='volume %s is already attached '
                                    'to server %s' % (volume_id,
                                                      instance_uuid))
        rules.check_can_attach(volume, db.migrations_in_progress(
            ctxt, volume_id))
        service = service_db.get(ctxt, compute_rpcapi.BINARY, instance['host'])
        self._check_readonly(service, [attach_mode])
        instance = self.begin_task(ctxt, instance_uuid, 'attach a volume to',
                                    states.TASK_ATTACHING)
        try:
            index = len(instances_db.bdm_get_all(
                ctxt, instance_uuid=instance_uuid))
            bdm = self._attach_records(ctxt, instance, volume, attach_mode,
                                       index, None)
            try:
                # Recorded, then checked under the volume's lock: a start
                # that any conductor recorded meanwhile is seen now, or
                # that start sees this mapping (volmig.db.locks).
                rules.check_attach_recorded(
                    volume, instance_uuid,
                    locks.attach_check(ctxt, volume_id), bdm['id'])
                self.compute_api.attach_volume(
                    ctxt, instance['host'], instance, bdm,
                    host_version=service['version'])
            except Exception:
                instances_db.bdm_destroy(ctxt, bdm['id'])
                self.volume_api.attachment_delete(ctxt, bdm['attachment_id'])
                raise
            self.volume_api.attachment_complete(ctxt, bdm['attachment_id'])
        finally:
            instances_db.instance_update(ctxt, instance_uuid,
                                         {'task_state': None})
        return bdm

    def detach_volume(self, ctxt, instance_uuid: str, volume_id: str) -> None:
        bdm = instances_db.bdm_get_by_volume(ctxt, instance_uuid, volume_id)
        instance = self.begin_task(ctxt, instance_uuid,
                                    'detach a volume from',
                                    states.TASK_DETACHING)
        self.compute_api.detach_volume(ctxt, instance['host'], instance, bdm)

    def volume_detached(self, ctxt, instance_uuid: str,
                        volume_id: str) -> None:
        bdm = instances_db.bdm_get_by_volume(ctxt, instance_uuid, volume_id)
        self.volume_api.attachment_delete(ctxt, bdm['attachment_id'])
        instances_db.bdm_destroy(ctxt, bdm['id'])
        instances_db.instance_update(ctxt, instance_uuid, {'task_state': None})

    def volume_detach_failed(self, ctxt, instance_uuid: str, volume_id: str,
                             reason: str) -> None:
        """The guest keeps the volume: end the task, record why."""
        LOG.warning('Detaching volume %(volume)s from server %(server)s '
                    'failed: %(reason)s', {'volume': volume_id,
                                           'server': instance_uuid,
                                           'reason': reason})
        instances_db.instance_update(ctxt, instance_uuid, dict(
            self._fault('Detaching volume %s failed: %s'
                        % (volume_id, reason)), task_state=None),
            expected_task_state=states.TASK_DETACHING)

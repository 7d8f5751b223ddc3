"""``/servers/{id}/os-volume_attachments``: attach (with attach_mode
from 2.61), list, show, detach, and the legacy swap (PUT)."""

from volmig import exception
from volmig.api import validation
from volmig.api.rest import controller
from volmig.api.rest import microversion
from volmig.api.rest.schemas import attachments as schemas
from volmig.conductor import rules
from volmig.policies import attachments as attachments_policy

RULE = attachments_policy.PREFIX


def attachment_view(req, bdm: dict) -> dict:
    view = {'volumeId': bdm['volume_id'], 'serverId': bdm['instance_uuid'],
            'device': bdm['device_name']}
    if req.is_at_least(microversion.ATTACH_MODE):
        view['attach_mode'] = bdm['attach_mode']
    if req.is_at_least(microversion.ATTACHMENT_ID):
        view['attachment_id'] = bdm['attachment_id']
    else:
        view['id'] = bdm['volume_id']
    return view


def _find(server: dict, volume_id: str) -> dict:
    for bdm in server['block_devices']:
        if bdm['volume_id'] == volume_id:
            return bdm
    raise exception.VolumeNotAttached(volume_id=volume_id,
                                      instance_uuid=server['uuid'])


class AttachmentsController(controller.Controller):

    def index(self, req, server_id):
        server = self.server(req, server_id, RULE % 'index')
        return 200, {'volumeAttachments': [
            attachment_view(req, bdm) for bdm in server['block_devices']]}

    def show(self, req, server_id, volume_id):
        server = self.server(req, server_id, RULE % 'show')
        validation.require_uuid('volume_id', volume_id)
        return 200, {'volumeAttachment': attachment_view(
            req, _find(server, volume_id))}

    @validation.schema(schemas.create, max_version=microversion.MULTIATTACH)
    @validation.schema(schemas.create_v261,
                       min_version=microversion.ATTACH_MODE)
    def create(self, req, server_id, body):
        server = self.server(req, server_id, RULE % 'create')
        request = body['volumeAttachment']
        volume = self.volume(req, request['volumeId'])
        rules.check_multiattach_version(
            volume, req.is_at_least(microversion.MULTIATTACH))
        bdm = self.conductor.attach_volume(
            req.context, server['uuid'], volume['id'],
            request.get('attach_mode', 'rw'))
        return 200, {'volumeAttachment': attachment_view(req, bdm)}

    def delete(self, req, server_id, volume_id):
        server = self.server(req, server_id, RULE % 'delete')
        validation.require_uuid('volume_id', volume_id)
        _find(server, volume_id)
        self.conductor.detach_volume(req.context, server['uuid'], volume_id)
        return 202, None

    @validation.schema(schemas.update)
    def update(self, req, server_id, volume_id, body):
        """The legacy swap: copy into the new volume and switch to it."""
        server = self.server(req, server_id, RULE % 'swap')
        validation.require_uuid('volume_id', volume_id)
        _find(server, volume_id)
        new_volume = self.volume(req, body['volumeAttachment']['volumeId'])
        self.conductor.swap_volume(req.context, server['uuid'], volume_id,
                                   new_volume['id'])
        return 202, None

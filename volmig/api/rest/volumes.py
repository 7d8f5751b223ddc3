"""``/os-volumes``: the block-storage adapter's volumes, and
``os-migrate_volume``."""

import math

from volmig import policy
from volmig.api import validation
from volmig.api.rest import controller
from volmig.api.rest.schemas import volumes as schemas
from volmig.policies import volumes as volumes_policy

RULE = volumes_policy.PREFIX
MIB_PER_GIB = 1024


def volume_view(req, volume: dict) -> dict:
    return {
        'id': volume['id'],
        'displayName': volume.get('name'),
        'status': volume['status'],
        'size': math.ceil(volume['size_mb'] / MIB_PER_GIB),
        'size_mb': volume['size_mb'],
        'multiattach': volume['multiattach'],
        'pool': volume.get('pool'),
        'migration_status': volume.get('migration_status'),
        'migration_progress': volume.get('migration_progress'),
        'migration_error': volume.get('migration_error'),
        'availabilityZone': 'nova',
        'attachments': [
            {'id': attachment['id'], 'volumeId': volume['id'],
             'serverId': attachment['instance_uuid'],
             'attach_mode': attachment['attach_mode'],
             'attach_status': attachment['attach_status']}
            for attachment in volume['attachments']],
    }


class VolumesController(controller.Controller):

    def index(self, req):
        ctxt = req.context
        policy.authorize(ctxt, RULE % 'index')
        page = controller.page(req)
        # The block-storage service shows a member its project's only.
        found = self.volume_api.list_volumes(ctxt, **page)
        return 200, dict({'volumes': [
            volume_view(req, volume) for volume in found
            if controller.visible(ctxt, volume.get('project_id'))]},
            **controller.links(req, 'volumes', found, page))

    def show(self, req, volume_id):
        volume = self.volume(req, volume_id, RULE % 'show')
        return 200, {'volume': volume_view(req, volume)}

    @validation.schema(schemas.create)
    def create(self, req, body):
        ctxt = req.context
        policy.authorize(ctxt, RULE % 'create')
        request = body['volume']
        size_mb = request.get('size_mb') or request['size'] * MIB_PER_GIB
        volume = self.volume_api.create_volume(
            ctxt, size_mb, name=request.get('display_name'),
            multiattach=request.get('multiattach', False),
            pool=request.get('pool'))
        return 200, {'volume': volume_view(req, volume)}

    def delete(self, req, volume_id):
        volume = self.volume(req, volume_id, RULE % 'delete')
        self.volume_api.delete_volume(req.context, volume['id'])
        return 202, None

    @validation.schema(schemas.action)
    def action(self, req, volume_id, body):
        """Returns once every attachment's migration has started."""
        volume = self.volume(req, volume_id, RULE % 'migrate')
        request = body['os-migrate_volume']
        migrating = self.volume_api.migrate_volume(
            req.context, volume['id'], request['pool'],
            request.get('max_bandwidth_mbps'))
        return 202, {'volume_id': volume['id'],
                     'migration_ids': migrating.get('migration_ids', [])}

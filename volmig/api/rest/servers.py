"""``/servers``: create (also several at once), list, show, delete,
stop and start."""

from volmig import exception
from volmig import policy
from volmig import states
from volmig.api import validation
from volmig.api.rest import controller
from volmig.api.rest import microversion
from volmig.api.rest.schemas import servers as schemas
from volmig.conductor import rules
from volmig.policies import servers as servers_policy

ZONE = 'nova'

_STATUS = {states.VM_BUILDING: 'BUILD', states.VM_ACTIVE: 'ACTIVE',
           states.VM_STOPPED: 'SHUTOFF', states.VM_ERROR: 'ERROR',
           states.VM_DELETED: 'DELETED'}


def volume_view(req, bdm: dict) -> dict:
    view = {'id': bdm['volume_id'], 'delete_on_termination': False}
    if req.is_at_least(microversion.ATTACH_MODE):
        view['attach_mode'] = bdm['attach_mode']
    return view


def _may_see_hosts(req) -> bool:
    """Checked once per request, not once per server of a list."""
    if 'volmig.may_see_hosts' not in req.environ:
        req.environ['volmig.may_see_hosts'] = policy.check(
            req.context, servers_policy.PREFIX % 'show:host')
    return req.environ['volmig.may_see_hosts']


def server_view(req, server: dict, detail: bool = True) -> dict:
    view = {'id': server['uuid'], 'name': server['name'],
            'links': controller.link(req, 'servers', server['uuid'])}
    if not detail:
        return view
    view.update({
        'status': _STATUS.get(server['vm_state'], 'UNKNOWN'),
        'tenant_id': server['project_id'],
        'user_id': server['user_id'],
        'created': server['created_at'],
        'updated': server['updated_at'],
        'OS-EXT-STS:vm_state': server['vm_state'],
        'OS-EXT-STS:task_state': server['task_state'],
        'OS-EXT-STS:power_state': server['power_state'],
        'OS-EXT-AZ:availability_zone': ZONE,
        'os-extended-volumes:volumes_attached': [
            volume_view(req, bdm) for bdm in server['block_devices']],
        # As Nova: "" for a server booted from a volume.
        'image': {'id': server['image_ref']} if server['image_ref'] else '',
    })
    if server['fault_message']:
        view['fault'] = {'message': server['fault_message'],
                         'created': server['fault_at']}
    if _may_see_hosts(req):
        view['OS-EXT-SRV-ATTR:host'] = server['host']
    return view


class ServersController(controller.Controller):

    def _list(self, req, detail: bool):
        ctxt = req.context
        policy.authorize(ctxt, servers_policy.PREFIX % 'index')
        page = controller.page(req)
        found = self.conductor.instance_list(ctxt, name=req.GET.get('name'),
                                             **page)
        return 200, dict({'servers': [server_view(req, server, detail)
                                      for server in found]},
                         **controller.links(req, 'servers', found, page,
                                            key='uuid'))

    def index(self, req):
        return self._list(req, detail=False)

    def detail(self, req):
        return self._list(req, detail=True)

    def show(self, req, server_id):
        server = self.server(req, server_id, servers_policy.PREFIX % 'show')
        return 200, {'server': server_view(req, server)}

    @validation.schema(schemas.create, max_version=microversion.MULTIATTACH)
    @validation.schema(schemas.create_v261,
                       min_version=microversion.ATTACH_MODE)
    def create(self, req, body):
        ctxt = req.context
        policy.authorize(ctxt, servers_policy.PREFIX % 'create')
        request = body['server']
        host = self._host(ctxt, request.get('availability_zone'))
        min_count = request.get('min_count', 1)
        count = request.get('max_count', min_count)
        if min_count > count:
            raise exception.InvalidInput(
                field='min_count', reason='min_count %d is more than '
                'max_count %d' % (min_count, count))
        block_devices = [self._block_device(bdm) for bdm in
                         request.get('block_device_mapping_v2', [])]
        volumes = [self.volume(req, bd['volume_id']) for bd in block_devices
                   if bd['destination_type'] == 'volume']
        for volume in volumes:
            rules.check_multiattach_version(
                volume, req.is_at_least(microversion.MULTIATTACH))
        rules.check_multi_create_version(
            count, volumes, req.is_at_least(microversion.ATTACH_MODE))
        try:
            built = self.conductor.build_instances(
                ctxt, request['name'], block_devices, count, host,
                image_ref=request.get('imageRef') or None)
        except exception.ServiceNotFound as exc:
            # Crossed RPC: its str() carries the conductor's traceback.
            raise exception.InvalidInput(field='availability_zone',
                                         reason=exception.safe_message(exc))
        servers = [server_view(req, server, detail=False)
                   for server in built]
        body = {'server': servers[0]}
        if count > 1:
            body['servers'] = servers
        return 202, body

    @staticmethod
    def _block_device(bdm: dict) -> dict:
        destination = bdm.get('destination_type', 'volume')
        if destination == 'volume' and (bdm['source_type'] != 'volume'
                                        or 'uuid' not in bdm):
            raise exception.InvalidInput(
                field='block_device_mapping_v2',
                reason='volmig attaches existing volumes only: a block '
                       'device with destination_type=volume needs '
                       'source_type=volume and the volume\'s uuid')
        block_device = {'destination_type': destination,
                        'boot_index': bdm.get('boot_index')}
        if destination == 'volume':
            block_device['volume_id'] = bdm['uuid']
        if 'attach_mode' in bdm:
            block_device['attach_mode'] = bdm['attach_mode']
        return block_device

    @staticmethod
    def _host(ctxt, zone: str | None) -> str | None:
        """``AZ``, ``AZ:HOST`` or ``:HOST``; only the host matters."""
        if not zone:
            return None
        name, _, host = zone.partition(':')
        if name not in ('', ZONE):
            raise exception.InvalidInput(
                field='availability_zone',
                reason='unknown availability zone %r; the only one is %r'
                % (name, ZONE))
        if not host:
            return None
        policy.authorize(ctxt, servers_policy.PREFIX % 'create:forced_host')
        return host

    def delete(self, req, server_id):
        server = self.server(req, server_id,
                             servers_policy.PREFIX % 'delete')
        self.conductor.delete_instance(req.context, server['uuid'])
        return 204, None

    @validation.schema(schemas.action)
    def action(self, req, server_id, body):
        (name,) = body
        verb = name.removeprefix('os-')
        server = self.server(req, server_id, servers_policy.PREFIX % verb)
        if verb == 'getConsoleOutput':
            length = body[name].get('length')
            length = None if length is None or int(length) < 0 else int(
                length)
            return 200, {'output': self.conductor.instance_console_output(
                req.context, server['uuid'], length)}
        if verb == 'stop':
            self.conductor.stop_instance(req.context, server['uuid'])
        else:
            self.conductor.start_instance(req.context, server['uuid'])
        return 202, None

"""What every REST controller shares: its RPC clients and the lookups
that apply project scoping."""

from volmig import exception
from volmig import policy
from volmig import volume
from volmig.api import validation
from volmig.conductor import rpcapi as conductor_rpcapi


def sees_all(ctxt) -> bool:
    """Admins, and services acting for users, see every project."""
    return ctxt.is_admin or ctxt.is_service


class Controller:

    _conductor = None
    _volume_api = None

    @property
    def conductor(self) -> conductor_rpcapi.ConductorAPI:
        if self._conductor is None:
            self._conductor = conductor_rpcapi.ConductorAPI()
        return self._conductor

    @property
    def volume_api(self):
        if self._volume_api is None:
            self._volume_api = volume.get_adapter()
        return self._volume_api

    def server(self, req, server_id: str, rule: str) -> dict:
        """The server, if the caller may see it, then ``rule``.

        Another project's server is a 404, as if it did not exist.
        """
        validation.require_uuid('server_id', server_id)
        ctxt = req.context
        server = self.conductor.instance_get(ctxt, server_id)
        if not sees_all(ctxt) and server['project_id'] != ctxt.project_id:
            raise exception.InstanceNotFound(instance_uuid=server_id)
        policy.authorize(ctxt, rule, {'project_id': server['project_id']})
        return server

    def volume(self, req, volume_id: str, rule: str | None = None) -> dict:
        """The volume, if the caller may see it, then ``rule``."""
        validation.require_uuid('volume_id', volume_id)
        ctxt = req.context
        found = self.volume_api.get_volume(ctxt, volume_id)
        if not sees_all(ctxt) and found.get('project_id') != ctxt.project_id:
            raise exception.VolumeNotFound(volume_id=volume_id)
        if rule:
            policy.authorize(ctxt, rule, {'project_id':
                                          found.get('project_id')})
        return found


def link(req, collection: str, item_id: str) -> list[dict]:
    return [{'rel': 'self', 'href': '%s/v2.1/%s/%s' % (
        req.application_url, collection, item_id)}]

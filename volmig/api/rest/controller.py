"""What every REST controller shares: its RPC clients and the lookups
that apply project scoping."""

import urllib.parse

from volmig import block_storage
from volmig import exception
from volmig import policy
from volmig.api import validation
from volmig.conductor import operator_rpcapi
from volmig.conf import CONF


def visible(ctxt, project_id: str | None) -> bool:
    return ctxt.sees_every_project or project_id == ctxt.project_id


def page(req, marker_type=str) -> dict:
    """A list request's page, as Nova reads it: ``limit`` items at most,
    ``[api] max_limit`` when it asks for none or for more, after the
    item ``marker`` names."""
    limit = req.GET.pop('limit', None)
    if limit is not None:
        if not limit.isdigit():
            raise exception.InvalidInput(
                field='limit', reason='%r is not a non-negative integer'
                % limit)
        limit = min(int(limit), CONF.api.max_limit)
    marker = req.GET.pop('marker', None)
    if marker is not None and marker_type is int:
        if not marker.isdigit():
            raise exception.MarkerNotFound(marker=marker)
        marker = int(marker)
    return {'limit': CONF.api.max_limit if limit is None else limit,
            'marker': marker}


def links(req, collection: str, items: list, page: dict,
          key: str = 'id') -> dict:
    """``{collection_links: [next]}`` when the page is full: the same
    request from its last item on; ``{}`` on the last page."""
    if not items or len(items) < page['limit']:
        return {}
    query = dict(req.GET, limit=page['limit'], marker=items[-1][key])
    return {collection + '_links': [{'rel': 'next', 'href': '%s?%s' % (
        req.path_url, urllib.parse.urlencode(sorted(query.items())))}]}


def _check_owner(ctxt, project_id, rule: str | None, not_found) -> None:
    """Another project's item is a 404, as if it did not exist."""
    if not visible(ctxt, project_id):
        raise not_found
    if rule:
        policy.authorize(ctxt, rule, {'project_id': project_id})


class Controller:

    _conductor = None
    _volume_api = None

    @property
    def conductor(self) -> operator_rpcapi.OperatorAPI:
        if self._conductor is None:
            self._conductor = operator_rpcapi.OperatorAPI()
        return self._conductor

    @property
    def volume_api(self):
        if self._volume_api is None:
            self._volume_api = block_storage.get_adapter()
        return self._volume_api

    @property
    def drainer(self):
        """Who drains pools: volmig-volume its own, through the block
        storage adapter; the conductor Cinder's, which has no drain."""
        if CONF.volume.backend == 'cinder':
            return self.conductor
        return self.volume_api

    def server(self, req, server_id: str, rule: str) -> dict:
        """The server, if the caller may see it, then ``rule``."""
        validation.require_uuid('server_id', server_id)
        server = self.conductor.instance_get(req.context, server_id)
        _check_owner(req.context, server['project_id'], rule,
                     exception.InstanceNotFound(instance_uuid=server_id))
        return server

    def volume(self, req, volume_id: str, rule: str | None = None) -> dict:
        """The volume, if the caller may see it, then ``rule``."""
        validation.require_uuid('volume_id', volume_id)
        found = self.volume_api.get_volume(req.context, volume_id)
        _check_owner(req.context, found.get('project_id'), rule,
                     exception.VolumeNotFound(volume_id=volume_id))
        return found


def link(req, collection: str, item_id: str) -> list[dict]:
    return [{'rel': 'self', 'href': '%s/v2.1/%s/%s' % (
        req.application_url, collection, item_id)}]

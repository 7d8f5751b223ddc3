"""The versions document at ``/`` and ``/v2.1``."""

from volmig.api.rest import microversion

UPDATED = '2026-11-22T00:00:00Z'


def _version(req) -> dict:
    return {'id': 'v2.1', 'status': 'CURRENT',
            'version': str(microversion.MAX),
            'min_version': str(microversion.MIN),
            'updated': UPDATED,
            'links': [{'rel': 'self', 'href': req.application_url
                       + '/v2.1/'}]}


class VersionsController:

    def index(self, req):
        return 200, {'versions': [_version(req)]}

    def show(self, req):
        return 200, {'version': _version(req)}

"""The REST client of both command lines: JSON over HTTP to volmig-api,
at one microversion, on a keystoneauth1 session.

``volmig`` builds it from a token or the cloud's credentials;
openstackclient builds it from its own session (``plugin.make_client``).
Either way the commands find it as ``client_manager.volume_migration``.
"""

from urllib import parse

from keystoneauth1 import exceptions as ks_exceptions
import microversion_parse
from osc_lib import exceptions
from oslo_utils import uuidutils

from volmig.api.rest import microversion

# Where a name is found: the collection, its key, and the name's key.
_NAMED = {'server': ('/servers', 'servers', 'name'),
          'volume': ('/os-volumes', 'volumes', 'displayName')}


def of(command) -> 'Client':
    """The client a command runs on: what both command lines' client
    managers hold under the plugin's API name."""
    return command.app.client_manager.volume_migration


class APIError(exceptions.CommandError):
    """volmig-api refused, or could not be reached: one plain line."""


def check_version(text: str) -> str:
    """``text`` if volmig-api and this client both know that
    microversion; a plain error naming the range if not."""
    try:
        version = microversion_parse.parse_version_string(text)
    except (TypeError, ValueError):
        version = None
    if version is None or not microversion.MIN <= version <= microversion.MAX:
        raise exceptions.CommandError(
            'volume migration API version %r is not one of %s to %s' % (
                text, microversion.MIN, microversion.MAX))
    return text


class Client:
    """volmig-api's REST API at ``endpoint``, on a keystoneauth1
    ``session`` (which carries the token or the credentials)."""

    def __init__(self, endpoint: str, session, version: str):
        self.endpoint = endpoint.rstrip('/')
        self.session = session
        self.headers = {
            'OpenStack-API-Version': '%s %s' % (microversion.SERVICE_TYPE,
                                                check_version(version)),
            'Accept': 'application/json'}

    def request(self, method: str, path: str, body=None):
        try:
            response = self.session.request(
                self.endpoint + path, method, json=body,
                headers=self.headers, raise_exc=False)
        except ks_exceptions.ConnectionError as exc:
            # requests' own words run over several nested reasons.
            raise APIError('cannot reach volmig-api at %s (%s)' % (
                self.endpoint, type(exc).__name__)) from None
        except ks_exceptions.ClientException as exc:
            # Keystone refused the credentials, or the catalog lacks the
            # service: keystoneauth's message says which.
            raise APIError(str(exc).splitlines()[0]) from None
        if response.status_code >= 400:
            try:
                (fault,) = response.json().values()
                message = fault['message']
            except (ValueError, KeyError, AttributeError, TypeError):
                message = response.text
            raise APIError('%s %s: %d %s' % (method, path,
                                             response.status_code, message))
        return response.json() if response.content else None

    def get(self, path):
        return self.request('GET', path)

    def get_all(self, path: str, key: str) -> list:
        """Every item of a list, page after page: each page's next link
        carries the query on, with the last item as its marker."""
        items, page = [], self.get(path)
        while True:
            items += page[key]
            links = page.get(key + '_links')
            if not links:
                return items
            page = self.get('%s?%s' % (path.partition('?')[0],
                                       parse.urlsplit(links[0]['href']).query))

    def find(self, kind: str, ref: str) -> str:
        """The id of the server or volume that ``ref`` names: its id, or
        a name that only it has."""
        if uuidutils.is_uuid_like(ref):
            return ref
        path, key, name_key = _NAMED[kind]
        found = [item['id'] for item in self.get_all(path, key)
                 if item.get(name_key) == ref]
        if len(found) == 1:
            return found[0]
        raise APIError('no %s is named %r' % (kind, ref) if not found else
                       '%d %ss are named %r: give an id' % (
                           len(found), kind, ref))

    def post(self, path, body):
        return self.request('POST', path, body)

    def put(self, path, body):
        return self.request('PUT', path, body)

    def delete(self, path):
        return self.request('DELETE', path)

"""``volmig``: the app, its REST session and its global options."""

import os
import sys

from cliff import app
from cliff import commandmanager
from oslo_utils import uuidutils
import requests

from volmig import version
from volmig.api.rest import microversion

DEFAULT_ENDPOINT = 'http://127.0.0.1:8788/v2.1'
# noauth2's administrator; with Keystone, pass a real token.
DEFAULT_TOKEN = 'admin:admin'  # noqa: S105 # nosec


# The help of arguments that name a server or a volume.
SERVER = 'The server, by name or id.'
VOLUME = 'The volume, by name or id.'
POLL_INTERVAL = 'Seconds between looks at the progress.'
# Where a name is found: the collection, its key, and the name's key.
_NAMED = {'server': ('/servers', 'servers', 'name'),
          'volume': ('/os-volumes', 'volumes', 'displayName')}


class APIError(Exception):
    """The API refused: carries its code and message."""


class Session:
    """JSON over HTTP to volmig-api, at the newest microversion."""

    def __init__(self, endpoint: str, token: str, timeout: float = 60):
        self.endpoint = endpoint.rstrip('/')
        self.timeout = timeout
        self.http = requests.Session()
        self.http.headers.update({
            'X-Auth-Token': token,
            'OpenStack-API-Version': '%s %s' % (microversion.SERVICE_TYPE,
                                                microversion.MAX),
            'Accept': 'application/json'})

    def request(self, method: str, path: str, body=None):
        try:
            response = self.http.request(method, self.endpoint + path,
                                         json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            # requests' own words run over several nested reasons.
            raise APIError('cannot reach volmig-api at %s (%s)' % (
                self.endpoint, type(exc).__name__)) from None
        if response.status_code >= 400:
            try:
                (fault,) = response.json().values()
                message = fault['message']
            except (ValueError, KeyError, AttributeError):
                message = response.text
            raise APIError('%s %s: %d %s' % (method, path,
                                             response.status_code, message))
        return response.json() if response.content else None

    def get(self, path):
        return self.request('GET', path)

    def find(self, kind: str, ref: str) -> str:
        """The id of the server or volume that ``ref`` names: its id, or
        a name that only it has."""
        if uuidutils.is_uuid_like(ref):
            return ref
        path, key, name_key = _NAMED[kind]
        found = [item['id'] for item in self.get(path)[key]
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


class VolmigApp(app.App):

    def __init__(self):
        super().__init__(description='Servers, volumes and live volume '
                                     'migrations through the volmig API.',
                         version=version.version_info.version_string(),
                         command_manager=commandmanager.CommandManager(
                             'volmig.cli'),
                         deferred_help=True)
        self.api: Session | None = None

    def build_option_parser(self, description, version, argparse_kwargs=None):
        parser = super().build_option_parser(description, version,
                                             argparse_kwargs)
        parser.add_argument(
            '--os-endpoint', default=os.environ.get('VOLMIG_ENDPOINT',
                                                    DEFAULT_ENDPOINT),
            help='The REST API, ending in /v2.1 (env VOLMIG_ENDPOINT).')
        parser.add_argument(
            '--os-token', default=os.environ.get('VOLMIG_TOKEN',
                                                 DEFAULT_TOKEN),
            help='A Keystone token, or USER:PROJECT with noauth2 '
                 '(env VOLMIG_TOKEN; default admin:admin).')
        return parser

    def initialize_app(self, argv):
        self.api = Session(self.options.os_endpoint, self.options.os_token)


def main(argv=None) -> int:
    return VolmigApp().run(sys.argv[1:] if argv is None else argv)

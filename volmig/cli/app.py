"""``volmig``: the app, its REST session and its global options."""

import os
import sys
from urllib import parse

from cliff import app
from cliff import commandmanager
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import openstack.config
from oslo_utils import uuidutils

from volmig import version
from volmig.api.rest import microversion

DEFAULT_ENDPOINT = 'http://127.0.0.1:8788/v2.1'
# noauth2's administrator, when no cloud is given.
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
    """JSON over HTTP to volmig-api, at the newest microversion, on a
    keystoneauth1 session (a token plugin, or the cloud's credentials)."""

    def __init__(self, endpoint: str, auth, timeout: float = 60):
        self.endpoint = endpoint.rstrip('/')
        self.http = ks_session.Session(auth=auth, timeout=timeout)
        self.headers = {
            'OpenStack-API-Version': '%s %s' % (microversion.SERVICE_TYPE,
                                                microversion.MAX),
            'Accept': 'application/json'}

    def request(self, method: str, path: str, body=None):
        try:
            response = self.http.request(
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
            except (ValueError, KeyError, AttributeError):
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


class VolmigApp(app.App):

    def __init__(self):
        # clouds.yaml and OS_*; read before the parser is built.
        self.clouds = openstack.config.OpenStackConfig()
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
        # openstackclient's options: --os-cloud and clouds.yaml, the OS_*
        # variables, any keystoneauth1 plugin (password, application
        # credential, token, ...).
        self.clouds.register_argparse_arguments(parser, sys.argv[1:])
        parser.add_argument(
            '--os-endpoint', default=os.environ.get('VOLMIG_ENDPOINT'),
            help='The REST API, ending in /v2.1 (env VOLMIG_ENDPOINT). By '
                 'default the compute endpoint of the cloud\'s catalog, or '
                 '%s without Keystone.' % DEFAULT_ENDPOINT)
        if '--os-token' not in parser._option_string_actions:
            parser.add_argument(
                '--os-token', default=os.environ.get('VOLMIG_TOKEN'),
                help='A token to send as it is (env VOLMIG_TOKEN): a '
                     'Keystone token, or USER:PROJECT for noauth2. Without '
                     'it or a cloud, noauth2\'s admin:admin.')
        return parser

    def initialize_app(self, argv):
        options = self.options
        keystone = (options.os_cloud or getattr(options, 'os_auth_url', None)
                    or os.environ.get('OS_AUTH_URL'))
        if options.os_token or not keystone:
            endpoint = options.os_endpoint or DEFAULT_ENDPOINT
            auth = token_endpoint.Token(endpoint,
                                        options.os_token or DEFAULT_TOKEN)
            self.api = Session(endpoint, auth)
            return
        cloud = self.clouds.get_one(argparse=options)
        session = cloud.get_session()
        endpoint = options.os_endpoint or session.get_endpoint(
            service_type='compute',
            interface=cloud.get_interface() or 'public')
        self.api = Session(endpoint, session.auth)


def main(argv=None) -> int:
    return VolmigApp().run(sys.argv[1:] if argv is None else argv)

"""Nova, as volmig reaches it: its REST API on volmig's own credentials
(``[nova]``), and the nova-manage commands an operator configured.

Nova lets no outside service rewrite a server's record of its volume
while the server runs, and its swap is Cinder's alone. A stopped
server's record is rewritten by ``nova-manage volume_attachment
refresh``, from Cinder's attachment, once Cinder has moved the data.
"""

import json
import subprocess  # nosec B404
import tempfile

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_log import log as logging

from volmig import exception

LOG = logging.getLogger(__name__)

# 2.73: a lock may carry its reason. Nova 34 serves up to 2.104.
MICROVERSION = '2.73'
RUNNING = ('ACTIVE', 'PAUSED')
STOPPED = 'SHUTOFF'


class Nova:

    def __init__(self, conf):
        self._conf = conf
        auth = ks_loading.load_auth_from_conf_options(conf, 'nova')
        session = ks_loading.load_session_from_conf_options(conf, 'nova',
                                                            auth=auth)
        self._api = ks_loading.load_adapter_from_conf_options(
            conf, 'nova', session=session, auth=auth)

    def _request(self, action: str, method: str, path: str, **kwargs):
        kwargs.setdefault('headers', {})['OpenStack-API-Version'] = (
            'compute %s' % MICROVERSION)
        try:
            answer = self._api.request(path, method, raise_exc=False,
                                       **kwargs)
        except ks_exc.ClientException as exc:
            raise exception.NovaUnavailable(
                action=action, reason=exception.safe_message(exc))
        if answer.status_code >= 500:
            raise exception.NovaUnavailable(action=action,
                                            reason=_fault(answer))
        if answer.status_code >= 400:
            raise exception.NovaRefused(action=action, reason=_fault(answer))
        return answer.json() if answer.content else None

    def servers(self, ids) -> dict[str, dict | None]:
        """{id: the server, or None where Nova has none of that id}."""
        found: dict = {}
        for server_id in ids:
            try:
                found[server_id] = self.server(server_id)
            except exception.NovaRefused:
                found[server_id] = None
        return found

    def server(self, server_id: str) -> dict:
        return self._request('show server %s' % server_id, 'GET',
                             '/servers/%s' % server_id)['server']

    def lock(self, server_id: str, reason: str) -> None:
        """Hold the server: its owner can neither start nor delete it."""
        self._request('lock server %s' % server_id, 'POST',
                      '/servers/%s/action' % server_id,
                      json={'lock': {'locked_reason': reason}})

    def unlock(self, server_id: str) -> None:
        self._request('unlock server %s' % server_id, 'POST',
                      '/servers/%s/action' % server_id, json={'unlock': None})

    def _manage(self, argv: list[str], action: str) -> str:
        try:
            done = subprocess.run(  # nosec B603: the operator's command
                argv, capture_output=True, text=True, check=False,
                timeout=self._conf.nova.command_timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise exception.NovaUnavailable(action=action,
                                            reason=exception.safe_message(
                                                exc))
        if done.returncode:
            # nova-manage says what went wrong on standard output, after
            # the warnings its imports print.
            said = (done.stdout.strip() or done.stderr.strip()).splitlines()
            raise exception.NovaRefused(action=action, reason='exit %d: %s'
                                        % (done.returncode,
                                           said[-1] if said else ''))
        return done.stdout

    def connector(self, host: str) -> dict:
        """The os-brick connector of compute host ``host``."""
        argv = [word.replace('{host}', host)
                for word in self._conf.nova.connector_command]
        action = 'give the connector of host %s' % host
        return self._json(self._manage(argv, action), action)

    @staticmethod
    def _json(printed: str, action: str) -> dict:
        # The JSON is the last line: imports may warn before it.
        try:
            return json.loads(printed.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise exception.NovaRefused(
                action=action,
                reason='its output is not JSON: %r' % printed[-200:])

    def record(self, server_id: str, volume_id: str) -> dict:
        """Nova's record of the server's volume: the connection_info its
        next start (or reboot) connects."""
        action = 'show the record of volume %s on server %s' % (volume_id,
                                                               server_id)
        return self._json(self._manage(list(self._conf.nova.manage_command) + [
            'volume_attachment', 'show', server_id, volume_id,
            '--connection_info', '--json'], action), action)

    def refresh(self, server_id: str, volume_id: str,
                connector: dict) -> None:
        """Rewrite the stopped server's record of the volume from a new
        Cinder attachment: the next start connects the volume where
        Cinder has it now. nova-manage reads the connector from a file,
        which this process writes (so ``manage_command`` runs where it
        can read volmig's temporary files)."""
        with tempfile.NamedTemporaryFile('w', suffix='.json') as handle:
            json.dump(connector, handle)
            handle.flush()
            self._manage(list(self._conf.nova.manage_command) + [
                'volume_attachment', 'refresh', server_id, volume_id,
                handle.name],
                'refresh the record of volume %s on server %s'
                % (volume_id, server_id))


def _fault(answer) -> str:
    try:
        body = answer.json()
        return next(iter(body.values()))['message']
    except (ValueError, StopIteration, KeyError, TypeError, AttributeError):
        return 'HTTP %d' % answer.status_code

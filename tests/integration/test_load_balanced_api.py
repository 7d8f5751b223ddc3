"""Two volmig-api services behind HAProxy, as a cloud runs its API
services: a request may go to either, a page's marker from one is good
on the other, and with one of them killed every request still gets its
answer, and a migration asked of it still ends with its bytes moved."""

import hashlib
import os
import signal

import requests

from tests.integration import base
from tests.integration import cluster
from tests.integration import haproxy

# HAProxy checks each API's /healthcheck every second and takes it out
# after two failures; a request sent to one that is down meanwhile is
# tried again on the other (redispatch). The response names the API
# that answered.
_CONFIG = """defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch
listen api
  bind 127.0.0.1:{front}
  balance roundrobin
  option httpchk GET /healthcheck
  http-response set-header X-Served-By %[srv_name]
{servers}
"""
_SERVER = ('  server {name} 127.0.0.1:{port} check inter 1s fastinter 500 '
           'rise 2 fall 2')
MIB = 1024 * 1024


class LoadBalancedAPITest(base.ProcessTestCase):
    COMPUTES = 1
    VOLUME_SERVICE = True

    def options(self):
        return {('volume', 'backend'): 'file',
                ('storage', 'pools'): self.pools()}

    def setUp(self):
        super().setUp()
        ports = {'api': int(self.endpoint.split(':')[-1].split('/')[0]),
                 'api-2': base.free_port()}
        self.cluster.spawn('volmig-api', 'api-2', cluster.write_config(
            os.path.join(self.state_path, 'api-2.conf'),
            {('DEFAULT', 'host'): 'api-2', ('api', 'port'): ports['api-2']}))
        front = base.free_port()
        self.useFixture(haproxy.HAProxy(self.state_path, _CONFIG.format(
            front=front, servers='\n'.join(
                _SERVER.format(name=name, port=port)
                for name, port in ports.items())), [front]))
        self.endpoint = 'http://127.0.0.1:%d/v2.1' % front
        self.wait_until(lambda: self.served_by(10) == {'api', 'api-2'},
                        timeout=60, what='both APIs behind the balancer')

    def request(self, method, path, body=None):
        """(status, body, the API that answered), through the balancer."""
        response = requests.request(
            method, self.endpoint + path, json=body, timeout=60,
            headers={'X-Auth-Token': 'admin:demo',
                     'OpenStack-API-Version': 'compute 2.61'})
        return (response.status_code,
                response.json() if response.content else None,
                response.headers.get('X-Served-By'))

    def served_by(self, requests_: int) -> set:
        return {self.request('GET', '/servers')[2]
                for _ in range(requests_)}

    def server(self) -> tuple[str, str]:
        """A server booted from a new volume, through the balancer:
        (server id, volume id)."""
        code, body, _ = self.request('POST', '/os-volumes', {
            'volume': {'size_mb': 16, 'pool': 'pool-a'}})
        self.assertEqual(200, code, body)
        volume_id = body['volume']['id']
        code, body, _ = self.request('POST', '/servers', {'server': {
            'name': 'vm', 'block_device_mapping_v2': [{
                'uuid': volume_id, 'source_type': 'volume',
                'destination_type': 'volume', 'boot_index': 0}]}})
        self.assertEqual(202, code, body)
        server_id = body['server']['id']
        self.wait_until(lambda: self.request(
            'GET', '/servers/%s' % server_id)[1]['server']['status']
            == 'ACTIVE', what='server %s to be active' % server_id)
        return server_id, volume_id

    def test_either_api_answers_and_one_can_die(self):
        made = [self.server() for _ in range(3)]

        # A page at a time, each page from whichever API the balancer
        # picks: the marker is the last server's id, good on both.
        pages, answered = [], set()
        path = '/servers?limit=1'
        while path:
            code, body, by = self.request('GET', path)
            self.assertEqual(200, code, body)
            pages += [server['id'] for server in body['servers']]
            answered.add(by)
            links = body.get('servers_links')
            path = links[0]['href'].split('/v2.1')[1] if links else None
        self.assertEqual([server_id for server_id, _ in made], pages)
        self.assertEqual({'api', 'api-2'}, answered)

        # A migration asked through the balancer; then the first API is
        # killed, and the migration is followed through the other.
        _, volume_id = made[0]
        path = self.volumes.get_volume(self.admin, volume_id)['path']
        content = os.urandom(16 * MIB)
        with open(path, 'wb') as handle:
            handle.write(content)
        code, body, _ = self.request(
            'POST', '/os-volumes/%s/action' % volume_id,
            {'os-migrate_volume': {'pool': 'pool-b'}})
        self.assertEqual(202, code, body)
        self.processes['api'].may_die = True
        self.processes['api'].signal(signal.SIGKILL)
        self.cluster.wait_for_death('api')

        answers = []

        def moved():
            code, body, by = self.request('GET', '/os-volumes/%s'
                                          % volume_id)
            answers.append((code, by))
            return (body['volume']['migration_status'] == 'success'
                    and body['volume'])
        volume = self.wait_until(moved, timeout=120,
                                 what='the migration to end')
        # Every request found the API alive: none failed, and every
        # one after the kill was answered by it.
        self.assertEqual({(200, 'api-2')}, set(answers))
        self.assertEqual('pool-b', volume['pool'])
        moved_path = self.volumes.get_volume(self.admin, volume_id)['path']
        self.assertIn('/pool-b/', moved_path)
        with open(moved_path, 'rb') as handle:
            self.assertEqual(hashlib.sha256(content).hexdigest(),
                             hashlib.sha256(handle.read()).hexdigest())
        # And new work goes on through the one left.
        self.server()
        self.assertEqual({'api-2'}, self.served_by(6))

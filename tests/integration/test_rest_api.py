"""The REST API served by a volmig-api process, over RabbitMQ.

A rolling upgrade (one agent still announces compute RPC 1.0) and a real
OpenStack client (openstacksdk) against the Nova-shaped API.
"""

import json
import os
import socket
import subprocess  # nosec B404
import sys
from urllib import parse

import openstack
import requests

from tests.integration import base

# What keystoneauth's "none" plugin sends as a token; noauth2 reads it as
# user and project "notused".
SDK_TOKEN = 'notused'


class RESTTestCase(base.ProcessTestCase):

    COMPUTES = 2
    COMPUTE_OPTIONS = {'compute-2': {('compute', 'announced_rpc_version'):
                                     '1.0'}}

    def rest(self, method, path, body=None, token='demo:demo'):
        response = requests.request(
            method, self.endpoint + path, json=body, timeout=30,
            headers={'X-Auth-Token': token,
                     'OpenStack-API-Version': 'compute 2.61'})
        return response.status_code, (response.json() if response.content
                                      else None)

    def volume(self, token='demo:demo'):
        code, body = self.rest('POST', '/os-volumes',
                               {'volume': {'size_mb': 16}}, token)
        self.assertEqual(200, code, body)
        return body['volume']['id']

    def server(self, host, block_devices=(), project='demo'):
        """A server of ``project`` on ``host`` (pinning needs an admin)."""
        code, body = self.rest('POST', '/servers', {'server': {
            'name': 'vm', 'availability_zone': 'nova:%s' % host,
            'block_device_mapping_v2': list(block_devices)}},
            'admin:%s' % project)
        self.assertEqual(202, code, body)
        server_id = body['server']['id']

        def active():
            _, found = self.rest('GET', '/servers/%s' % server_id, None,
                                 'admin:admin')
            return found['server']['status'] == 'ACTIVE'
        self.wait_until(active, what='server %s to be active' % server_id)
        return server_id


class OldComputeTest(RESTTestCase):

    def test_readonly_refused_on_old_agent_rw_still_works(self):
        volume_id = self.volume()
        code, body = self.rest('POST', '/servers', {'server': {
            'name': 'ro', 'availability_zone': 'nova:compute-2',
            'block_device_mapping_v2': [{
                'uuid': volume_id, 'source_type': 'volume',
                'destination_type': 'volume', 'attach_mode': 'ro'}]}},
            'admin:demo')
        self.assertEqual(409, code, body)
        self.assertIn('compute-2 is too old for read-only attachments',
                      body['conflictingRequest']['message'])
        self.assertEqual([], self.rest('GET', '/servers')[1]['servers'])
        self.assertEqual([], self.rest('GET', '/os-volumes/%s' % volume_id)[
            1]['volume']['attachments'])

        server_id = self.server('compute-2', [{
            'uuid': volume_id, 'source_type': 'volume',
            'destination_type': 'volume'}])
        code, body = self.rest('GET', '/servers/%s/os-volume_attachments'
                               % server_id)
        self.assertEqual(200, code)
        self.assertEqual([(volume_id, 'rw')],
                         [(a['volumeId'], a['attach_mode'])
                          for a in body['volumeAttachments']])

        second = self.volume()
        code, body = self.rest('POST', '/servers/%s/os-volume_attachments'
                               % server_id, {'volumeAttachment': {
                                   'volumeId': second, 'attach_mode': 'ro'}})
        self.assertEqual(409, code, body)
        self.assertEqual('available', self.rest(
            'GET', '/os-volumes/%s' % second)[1]['volume']['status'])
        code, body = self.rest('POST', '/servers/%s/os-volume_attachments'
                               % server_id, {'volumeAttachment': {
                                   'volumeId': second}})
        self.assertEqual(200, code, body)
        self.assertEqual('rw', body['volumeAttachment']['attach_mode'])


class OpenStackSDKTest(RESTTestCase):

    COMPUTE_OPTIONS: dict = {}

    def test_sdk_lists_attaches_and_detaches(self):
        conn = openstack.connect(
            auth_type='none', compute_endpoint_override=self.endpoint,
            compute_api_version='2.61', load_envvars=False,
            load_yaml_config=False)
        self.addCleanup(conn.close)
        volume_id = self.volume(SDK_TOKEN)
        server_id = self.server('compute-1', project=SDK_TOKEN)

        self.assertEqual([server_id], [s.id for s in conn.compute.servers()])
        server = conn.compute.get_server(server_id)
        self.assertEqual('ACTIVE', server.status)

        attachment = conn.compute.create_volume_attachment(
            server, volume_id=volume_id)
        self.assertEqual(volume_id, attachment.volume_id)
        self.assertEqual('/dev/vda', attachment.device)
        self.assertEqual([volume_id], [a.volume_id for a in
                                       conn.compute.volume_attachments(
                                           server)])

        conn.compute.delete_volume_attachment(server, volume_id)
        self.wait_until(
            lambda: not list(conn.compute.volume_attachments(server)),
            what='the volume to be detached')
        self.assertEqual('available', self.rest(
            'GET', '/os-volumes/%s' % volume_id, token=SDK_TOKEN)[1][
                'volume']['status'])


class CLITest(RESTTestCase):
    """The ``volmig`` command against the volmig-api process, whose lists
    come two items to a page."""

    COMPUTE_OPTIONS: dict = {}
    OPTIONS = {('api', 'max_limit'): 2}

    def test_clients_follow_the_pages_of_a_list(self):
        volumes = {self.volume() for _ in range(3)}
        code, first = self.rest('GET', '/os-volumes')
        self.assertEqual((200, 2), (code, len(first['volumes'])), first)
        # The CLI gathers every page.
        self.assertEqual(volumes, set(self.volmig(
            'volume', 'list', '-f', 'value', '-c', 'ID').split()))
        # So does openstacksdk, from servers_links.
        conn = openstack.connect(
            auth_type='none', compute_endpoint_override=self.endpoint,
            compute_api_version='2.61', load_envvars=False,
            load_yaml_config=False)
        self.addCleanup(conn.close)
        servers = {self.server('compute-1', project=SDK_TOKEN)
                   for _ in range(3)}
        self.assertEqual(servers, {s.id for s in conn.compute.servers()})

    def volmig(self, *args, token='demo:demo'):
        code, out, err = self.cli(*args, token=token)
        self.assertEqual(0, code, err)
        return out

    def test_shared_read_only_volume_flow(self):
        volume_id = self.volmig('volume', 'create', '--size-mb', '16',
                                '--multiattach', '-f', 'value',
                                '-c', 'id').strip()
        created = self.volmig('server', 'create', 'web', '--volume',
                              volume_id, '--count', '2', '--mode', 'ro',
                              '-f', 'json')
        servers = {server['Name']: server['ID']
                   for server in json.loads(created)}
        self.assertEqual(['web-1', 'web-2'], sorted(servers))

        def both_active():
            listed = json.loads(self.volmig('server', 'list', '-f', 'json'))
            return (sorted(s['Status'] for s in listed) == ['ACTIVE'] * 2
                    and listed)
        listed = self.wait_until(both_active, what='both servers active')
        self.assertEqual([['%s (ro)' % volume_id]] * 2,
                         [server['Volumes'] for server in listed])

        shown = json.loads(self.volmig('volume', 'show', volume_id,
                                       '-f', 'json'))
        self.assertEqual('in-use', shown['status'])
        self.assertEqual(sorted((s, 'ro') for s in servers.values()),
                         sorted((a['serverId'], a['attach_mode'])
                                for a in shown['attachments']))

        self.volmig('volume', 'detach', servers['web-2'], volume_id)
        self.wait_until(lambda: len(json.loads(self.volmig(
            'volume', 'show', volume_id, '-f', 'json'))[
                'attachments']) == 1, what='the detach')

    def test_refusal_is_reported_with_the_api_message(self):
        # A server the CLI cannot name: it asks the API by id (a name
        # that no server has is the CLI's own one-line refusal).
        missing = '5d4c9a53-6c8f-4e0e-9d6e-1f1f3c2b7a10'
        for reference, message in (
                (missing, '404 Server %s could not be found' % missing),
                ('not-a-uuid', "no server is named 'not-a-uuid'")):
            result = subprocess.run(  # nosec B603
                [os.path.join(sys.prefix, 'bin', 'volmig'),
                 '--os-endpoint', self.endpoint, '--os-token', 'demo:demo',
                 'server', 'show', reference],
                capture_output=True, text=True, timeout=60, check=False)
            self.assertEqual(1, result.returncode, result)
            self.assertIn(message, result.stderr)
            self.assertNotIn('Traceback', result.stderr + result.stdout)


class MalformedRequestTest(RESTTestCase):

    COMPUTES = 1
    COMPUTE_OPTIONS: dict = {}

    def test_malformed_chunked_body_is_a_400(self):
        url = parse.urlsplit(self.endpoint)
        request = (b'POST /v2.1/os-volumes HTTP/1.1\r\n'
                   b'Host: 127.0.0.1\r\n'
                   b'X-Auth-Token: admin:admin\r\n'
                   b'Content-Type: application/json\r\n'
                   b'Transfer-Encoding: chunked\r\n'
                   b'Connection: close\r\n\r\n'
                   b'zz\r\n{"volume": \r\n0\r\n\r\n')
        with socket.create_connection((url.hostname, url.port),
                                      timeout=30) as connection:
            connection.sendall(request)
            reply = b''
            while chunk := connection.recv(65536):
                reply += chunk
        status_line, _, rest = reply.partition(b'\r\n')
        self.assertIn(b' 400 ', status_line, reply)
        self.assertNotIn(b'Traceback', rest)
        code, body = self.rest('GET', '/os-volumes', token='admin:admin')
        self.assertEqual((200, []), (code, body['volumes']))

    def test_unknown_host_is_a_400_without_a_traceback(self):
        # The conductor refuses it over RabbitMQ; what crosses carries the
        # conductor's traceback, which must stay in its log.
        for host in ('../../etc', 'no-such-host'):
            code, body = self.rest('POST', '/servers', {'server': {
                'name': 'vm', 'availability_zone': 'nova:%s' % host}},
                'admin:admin')
            self.assertEqual(400, code, body)
            message = body['badRequest']['message']
            self.assertIn(host, message)
            self.assertNotIn('Traceback', message)
            self.assertEqual([message], message.splitlines())

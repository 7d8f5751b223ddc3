"""Version-cap negotiation against a real RPC server on fake://."""

import oslo_messaging as messaging
from oslotest import base

from tests import fixtures
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig import signing
from volmig.compute import rpcapi


class OldComputeEndpoint:
    """What a compute agent of RPC 1.0 accepts: no attach_mode."""

    target = messaging.Target(version='1.0')

    def __init__(self):
        self.received = []

    def attach_volume(self, ctxt, instance, bdm):
        self.received.append(('attach_volume', bdm['attach_mode']))

    def build_instance(self, ctxt, instance, block_devices):
        self.received.append(('build_instance', len(block_devices)))


class VersionCapTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(fixtures.ConfFixture()).conf
        self.useFixture(fixtures.DatabaseFixture())
        self.useFixture(fixtures.RPCFixture())
        # The controllers seal what they send it with its key.
        rpc.register_host(signing.COMPUTE, 'old-host')
        self.endpoint = OldComputeEndpoint()
        server = rpc.get_server(rpcapi.TOPIC, 'old-host', [self.endpoint])
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.ctxt = volmig_context.get_admin_context()
        self.instance = {'uuid': 'i-1'}

    def _api(self, cap, min_version='1.1'):
        self.conf(compute=cap, group='upgrade_levels')
        return rpcapi.ComputeAPI(lambda: min_version)

    def _bdm(self, mode):
        return {'volume_id': 'v-1', 'attach_mode': mode}

    def test_capped_at_1_0_sends_no_attach_mode(self):
        api = self._api('1.0')
        api.attach_volume(self.ctxt, 'old-host', self.instance,
                          self._bdm('rw'))
        self.assertEqual([('attach_volume', 'rw')], self.endpoint.received)

    def test_capped_at_1_0_refuses_read_only(self):
        api = self._api('1.0')
        exc = self.assertRaises(exception.ComputeTooOld, api.attach_volume,
                                self.ctxt, 'old-host', self.instance,
                                self._bdm('ro'))
        self.assertIn('old-host', str(exc))
        self.assertRaises(exception.ComputeTooOld, api.build_instance,
                          self.ctxt, 'old-host', self.instance,
                          [self._bdm('rw'), self._bdm('ro')])
        self.assertEqual([], self.endpoint.received)

    def test_auto_takes_the_oldest_agent(self):
        api = self._api('auto', min_version='1.0')
        self.assertFalse(api.can_send_version('1.1'))
        self.assertRaises(exception.ComputeTooOld, api.attach_volume,
                          self.ctxt, 'old-host', self.instance,
                          self._bdm('ro'))

    def test_release_alias(self):
        self.assertFalse(self._api('2026.1').can_send_version('1.1'))
        self.assertTrue(self._api('2026.2').can_send_version('1.1'))

    def test_host_version_checked_under_a_newer_cap(self):
        api = self._api('auto', min_version='1.1')
        self.assertTrue(api.can_send_version('1.1'))
        self.assertFalse(api.can_send_version('1.1', host_version='1.0'))
        api.build_instance(self.ctxt, 'old-host', self.instance,
                           [self._bdm('rw')], host_version='1.0')
        self.assertRaises(exception.ComputeTooOld, api.build_instance,
                          self.ctxt, 'old-host', self.instance,
                          [self._bdm('ro')], host_version='1.0')

    def test_no_agent_registered_yet_is_not_pinned(self):
        versions = iter([None, '1.0'])
        self.conf(compute='auto', group='upgrade_levels')
        api = rpcapi.ComputeAPI(lambda: next(versions))
        self.assertTrue(api.can_send_version('1.1'))
        self.assertFalse(api.can_send_version('1.1'))

"""Operators disable, enable and delete services through the conductor."""

import datetime

from oslo_utils import timeutils
import sqlalchemy as sa

from tests.functional import base
from volmig import exception
from volmig import service
from volmig.db import api as db_api
from volmig.db import models


class ServiceManagementTest(base.ServicesTestCase):

    COMPUTES = 2

    def _hosts(self):
        return {svc['host']: svc for svc in self.conductor.service_get_all(
            self.admin, service.COMPUTE)}

    def test_a_disabled_host_takes_no_new_servers(self):
        disabled = self.conductor.service_set_disabled(
            self.admin, service.COMPUTE, 'compute-1', True, 'array retired')
        self.assertEqual((True, 'array retired'),
                         (disabled['disabled'], disabled['disabled_reason']))
        placed = [self.create_server()[0]['host'] for _ in range(3)]
        self.assertEqual(['compute-2'] * 3, placed)
        exc = self.assertRaises(exception.NoValidHost, self.create_server,
                                host='compute-1')
        self.assertIn('compute host compute-1 is disabled (array retired)',
                      str(exc))
        # A heartbeat keeps the status an operator set.
        self.services['compute-1'].report_state()
        self.assertTrue(self._hosts()['compute-1']['disabled'])
        enabled = self.conductor.service_set_disabled(
            self.admin, service.COMPUTE, 'compute-1', False, 'ignored')
        self.assertEqual((False, None), (enabled['disabled'],
                                         enabled['disabled_reason']))
        self.assertEqual('compute-1', self.create_server()[0]['host'])

    def _take_down(self, host):
        # Graceful, so that a heartbeat in flight at the stop lands
        # before the record ages, not after (CI saw a host up again once).
        self.services.pop(host).stop(graceful=True)
        with db_api.transaction(self.admin) as session:
            record = session.scalars(sa.select(models.Service).filter_by(
                host=host)).one()
            record.last_seen_at = timeutils.utcnow() - datetime.timedelta(
                hours=1)

    def test_delete_refuses_a_live_service_or_a_host_with_servers(self):
        server, _ = self.create_server(host='compute-1')
        exc = self.assertRaises(exception.ServiceIsUp,
                                self.conductor.service_delete, self.admin,
                                service.COMPUTE, 'compute-1')
        self.assertIn('stop it first', str(exc))
        self._take_down('compute-1')
        exc = self.assertRaises(exception.ServiceInUse,
                                self.conductor.service_delete, self.admin,
                                service.COMPUTE, 'compute-1')
        self.assertIn('still has 1 server(s)', str(exc))
        self.assertIn('compute-1', self._hosts())

    def test_delete_a_dead_empty_host(self):
        self._take_down('compute-2')
        self.conductor.service_delete(self.admin, service.COMPUTE,
                                      'compute-2')
        self.assertEqual(['compute-1'], sorted(self._hosts()))
        exc = self.assertRaises(exception.ServiceNotFound,
                                self.conductor.service_delete, self.admin,
                                service.COMPUTE, 'compute-2')
        self.assertIn('No volmig-compute service is registered on host '
                      'compute-2', str(exc))

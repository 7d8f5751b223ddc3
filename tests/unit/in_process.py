"""volmig's services wired in one process with no RabbitMQ, for the unit
tests of the flow modules: each RPC API is replaced by the object that
would serve it, so a test runs the API's manager, the conductor and the
agent's runner as they run in a deployment, minus the transport."""

import oslo_messaging as messaging

from volmig import client as client_mod
from volmig.api import manager as api_manager
from volmig.compute import jobs
from volmig.compute import migrations as runner_mod
from volmig.compute.drivers import fake
from volmig.conf import CONF


class Notifications:
    """Records each notification as ``event.phase``."""

    def __init__(self):
        self.sent = []

    def notify(self, ctxt, event, phase, data, exc=None):
        self.sent.append('%s.%s' % (event, phase))


class Conductor:
    """The conductor's RPC API (what the API and the agents call), served
    by a MigrationConductor."""

    def __init__(self, migrations):
        self.migrations = migrations

    def can_send_version(self, version):
        return True

    def migration_begin(self, ctxt, src_attachment_id, starting=False,
                        owner=None):
        return self.migrations.begin(ctxt, src_attachment_id, starting,
                                     owner)

    def migration_started(self, ctxt, migration, pauses):
        return self.migrations.started(ctxt, migration['id'], pauses)

    def migration_release(self, ctxt, migration_id):
        self.migrations.release(ctxt, migration_id)

    def migration_accept_cancel(self, ctxt, src_attachment_id):
        return self.migrations.accept_cancel(ctxt, src_attachment_id)

    def migration_accept_complete(self, ctxt, src_attachment_id,
                                  dst_attachment_id):
        return self.migrations.accept_complete(ctxt, src_attachment_id,
                                               dst_attachment_id)

    def migration_get(self, ctxt, migration_ref):
        return self.migrations.get(ctxt, migration_ref)

    def migration_list(self, ctxt, filters, limit=None, marker=None):
        return self.migrations.get_all(ctxt, filters, limit=limit,
                                       marker=marker)

    def migration_fail(self, ctxt, migration_id, reason, recovery_needed):
        return self.migrations.fail(ctxt, migration_id, reason,
                                    recovery_needed)

    def migration_switched(self, ctxt, migration_id, pauses):
        return self.migrations.switched(ctxt, migration_id, pauses)

    def migration_job_ended(self, ctxt, migration_id, status, pauses):
        return self.migrations.job_ended(ctxt, migration_id, status, pauses)

    def migration_report_progress(self, ctxt, migration_id, done, total):
        return self.migrations.report_progress(ctxt, migration_id, done,
                                               total)


class Compute:
    """The compute agent's RPC API, served by its MigrationRunner."""

    def __init__(self, runner):
        self.runner = runner
        self.sent = []

    def can_send_version(self, version):
        return True

    def migration_start(self, ctxt, host, migration, bdm):
        self.sent.append(('start', host, migration['id']))
        return self.runner.start(ctxt, migration, bdm)

    def migration_cancel(self, ctxt, host, migration, bdm):
        self.sent.append(('cancel', host, migration['id']))
        self.runner.cancel(ctxt, migration, bdm)

    def migration_complete(self, ctxt, host, migration, bdm,
                           dst_connection_info):
        self.sent.append(('complete', host, migration['id']))
        self.runner.complete(ctxt, migration, bdm, dst_connection_info)


class Deployment:
    """One API, one conductor and one agent (host ``host``, fake driver),
    on the conductor's records in the test's database."""

    def __init__(self, test, migrations, host='h1'):
        self.driver = fake.FakeDriver(CONF)
        self.jobs = jobs.JobRunner(1, 0.01)
        test.addCleanup(self.jobs.stop)
        self.notes = Notifications()
        self.conductor = Conductor(migrations)
        self.runner = runner_mod.MigrationRunner(
            host, self.driver, self.conductor, self.jobs, self.notes)
        self.compute = Compute(self.runner)
        self.api = api_manager.APIManager('api-1')
        self.api.conductor = self.conductor
        self.api.compute = self.compute

    def client(self):
        return Client(self.api)


class Client(client_mod.MigrationClient):
    """The block-storage client, calling the API's manager directly."""

    def __init__(self, api):
        # No transport: every call goes to ``api`` in this process.
        self._owned = None
        self._poll_interval = 0.01
        self.api = api

    def _call(self, ctxt, method, version='1.0', **kwargs):
        try:
            return getattr(self.api, method)(ctxt, **kwargs)
        except messaging.ExpectedException as wrapped:
            # What oslo.messaging's server unwraps before replying.
            raise wrapped.exc_info[1] from None

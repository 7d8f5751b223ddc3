"""Finds work stranded by a dead compute agent or API, and ends it.

DESIGN section 7: no instance stays in a task state, and no migration in
progress, after the fault that put it there has gone.
"""

import datetime

from oslo_log import log as logging

from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import instances as instance_conductor
from volmig.conductor import migrations as migration_conductor
from volmig.conf import CONF
from volmig.db import api as db

LOG = logging.getLogger(__name__)

# Tasks whose agent died will never report back; migrations are healed
# through their own records instead.
_AGENT_TASKS = (states.TASK_POWERING_OFF, states.TASK_POWERING_ON,
                states.TASK_DELETING, states.TASK_ATTACHING,
                states.TASK_DETACHING)


def _recovery_needed(migration: dict) -> bool:
    """Whether the guest may be off src after the agent died mid-phase."""
    if migration['mode'] == states.MODE_OFFLINE:
        return migration['status'] == states.COMPLETING
    return migration['status'] != states.ACCEPTED


class Healer:

    def __init__(self, migrations: migration_conductor.MigrationConductor):
        self.migrations = migrations

    def run(self, ctxt) -> None:
        down = {service['host']: service
                for service in db.service_get_all(
                    ctxt, compute_rpcapi.BINARY)
                if not instance_conductor.service_is_up(service)}
        self._fail_stranded_migrations(ctxt, down)
        self._fail_unclaimed_migrations(ctxt)
        self._clear_stuck_tasks(ctxt, down)

    def _fail_stranded_migrations(self, ctxt, down: dict) -> None:
        for migration in db.migration_get_all(ctxt,
                                              status=states.AGENT_BUSY):
            service = down.get(migration['host'])
            if service is None:
                continue
            self.migrations.fail(
                ctxt, migration['id'],
                'the compute agent on host %s stopped reporting (last seen '
                '%s UTC) while the migration was %s' % (
                    migration['host'],
                    service['last_seen_at'].isoformat(timespec='seconds'),
                    migration['status']),
                _recovery_needed(migration))

    def _fail_unclaimed_migrations(self, ctxt) -> None:
        age = datetime.timedelta(seconds=CONF.conductor.accepted_timeout)
        for migration in db.migrations_older_than(ctxt, states.ACCEPTED,
                                                  age):
            self.migrations.fail(
                ctxt, migration['id'],
                'no compute agent took the migration within %d seconds; '
                'nothing was done to the guest' %
                CONF.conductor.accepted_timeout,
                recovery_needed=False)

    @staticmethod
    def _clear_stuck_tasks(ctxt, down: dict) -> None:
        for host in down:
            for instance in db.instance_get_all(ctxt, host=host):
                values: dict = {}
                if instance['task_state'] in _AGENT_TASKS:
                    values['task_state'] = None
                if instance['vm_state'] == states.VM_BUILDING:
                    values['vm_state'] = states.VM_ERROR
                if values:
                    LOG.warning('Server %(uuid)s: compute agent on %(host)s '
                                'is down; resetting %(values)s',
                                {'uuid': instance['uuid'], 'host': host,
                                 'values': values})
                    db.instance_update(ctxt, instance['uuid'], values)

"""Finds work that nothing is finishing, and gets it finished or failed.

doc/source/design.rst, "What must never happen": no instance stays in a
task state, and no migration in
progress, after the fault that put it there has gone. A migration whose
agent has been silent for ``[conductor] migration_stall_timeout`` is
handed back to that agent to reconcile, whether the agent restarted or
not. One silent for twice as long, or whose agent is down that long, is
failed; ``recovery_needed`` then says whether the guest may be off src,
and the agent finishes that recovery when it comes back.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from volmig import exception
from volmig import notifications
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import destinations
from volmig.conductor import migrations as migration_conductor
from volmig.conductor import services
from volmig.conf import CONF
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)

# Tasks whose agent died will never report back; migrations are healed
# through their own records instead.
_AGENT_TASKS = (states.TASK_POWERING_OFF, states.TASK_POWERING_ON,
                states.TASK_DELETING, states.TASK_ATTACHING,
                states.TASK_DETACHING)


def recovery_needed(migration: dict) -> bool:
    """Whether the guest may be off src when the migration is failed."""
    if migration['mode'] == states.MODE_OFFLINE:
        return migration['status'] == states.COMPLETING
    return migration['status'] not in states.NOT_SENT


class Healer:

    def __init__(self, migrations: migration_conductor.MigrationConductor,
                 compute_api: compute_rpcapi.ComputeAPI):
        self.migrations = migrations
        self.compute_api = compute_api

    def run(self, ctxt) -> None:
        every = service_db.get_all(ctxt)
        self._announce_services(ctxt, every)
        down = {service['host']: service for service in every
                if service['binary'] == compute_rpcapi.BINARY
                and not services.service_is_up(service)}
        self._reconcile_silent_migrations(ctxt, down)
        self._fail_unclaimed_migrations(ctxt)
        self._clear_stuck_tasks(ctxt, down)
        self._retry_lost_tasks(ctxt, down)

    def _announce_services(self, ctxt, every: list[dict]) -> None:
        """``service.down`` for a service newly silent past
        ``service_down_time``, ``service.up`` once it is heard again:
        once each, by whichever conductor records it first."""
        notifier = self.migrations.notifier
        if notifier is None:
            return
        since = services.up_since()
        for service in every:
            down = service['last_seen_at'] < since
            if down == service['reported_down'] or not \
                    service_db.mark_reported(ctxt, service['id'], down, since):
                continue
            (LOG.warning if down else LOG.info)(
                'Service %(binary)s on %(host)s is %(state)s', {
                    'binary': service['binary'], 'host': service['host'],
                    'state': 'down' if down else 'up again'})
            notifier.notify(
                ctxt, notifications.SERVICE, 'down' if down else 'up', {
                    name: service[name] for name in (
                        'host', 'binary', 'version', 'disabled',
                        'last_seen_at')}, error=down)

    def _reconcile_silent_migrations(self, ctxt, down: dict) -> None:
        stall = CONF.conductor.migration_stall_timeout
        busy = states.IN_PROGRESS - states.NOT_SENT
        hopeless = {migration['id'] for migration in db.migrations_older_than(
            ctxt, busy, datetime.timedelta(seconds=2 * stall))}
        for migration in db.migrations_older_than(
                ctxt, busy, datetime.timedelta(seconds=stall)):
            if services.in_flight(ctxt, migration):
                continue
            host = migration['host']
            if migration['id'] in hopeless or host in down:
                why = ('the compute agent on host %s is down' % host
                       if host in down else
                       'the compute agent on host %s did not answer a '
                       'reconciliation' % host)
                self.migrations.fail(
                    ctxt, migration['id'],
                    '%s; the migration made no progress for %d seconds '
                    'while %s' % (why, stall, migration['status']),
                    recovery_needed(migration))
                continue
            LOG.warning('Volume migration %(id)s has been silent for '
                        '%(stall)d s while %(status)s; asking its agent on '
                        '%(host)s to reconcile it',
                        {'id': migration['id'], 'stall': stall,
                         'status': migration['status'], 'host': host})
            self.reconcile(ctxt, migration)

    def reconcile(self, ctxt, migration: dict) -> None:
        """Ask the migration's agent to settle it against its guest."""
        work = self.work(ctxt, migration)
        self.compute_api.migration_reconcile(ctxt, migration['host'],
                                             **work)

    def work(self, ctxt, migration: dict) -> dict:
        """What an agent needs to reconcile one migration."""
        try:
            bdm = instances_db.bdm_get_by_volume(
                ctxt, migration['instance_uuid'], migration['volume_id'])
        except exception.NotFound:
            bdm = None
        dst_connection_info = None
        if migration['dst_attachment_id']:
            volume_api = self.migrations.volume_api
            if migration['status'] == states.COMPLETING:
                dst = destinations.dst_to_send(
                    volume_api, ctxt, migration['dst_attachment_id'],
                    migration['host'], bdm['attach_mode'] if bdm else 'rw')
            else:
                dst = volume_api.attachment_get(
                    ctxt, migration['dst_attachment_id'])
            dst_connection_info = dst['connection_info']
        return {'migration': migration_conductor.present(migration),
                'bdm': bdm, 'dst_connection_info': dst_connection_info}

    def work_for_host(self, ctxt, host: str,
                      uptime: float | None = None) -> list[dict]:
        """Every migration an agent starting up on ``host`` must settle.

        One changed after the agent started (``uptime`` seconds ago, by
        this conductor's clock) is being driven by a request that agent
        serves, such as a cancel still in its queue: it is not left over.
        """
        started = (timeutils.utcnow() - datetime.timedelta(seconds=uptime)
                   if uptime is not None else None)
        return [self.work(ctxt, migration) for migration in
                db.migration_get_all_for_recovery(ctxt, host)
                if not services.in_flight(ctxt, migration)
                and not (started and (migration['updated_at'] or
                                      migration['created_at']) > started)]

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
            for instance in instances_db.instance_get_all(ctxt, host=host):
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
                    instances_db.instance_update(ctxt, instance['uuid'],
                                                 values)

    def _retry_lost_tasks(self, ctxt, down: dict) -> None:
        """Tasks on live hosts whose cast was lost (a broker restart).

        A delete is sent again: terminating is idempotent. A power change
        is cleared; the server shows its last known power state.
        """
        age = datetime.timedelta(seconds=CONF.conductor.task_timeout)
        for instance in instances_db.instances_in_task_older_than(
                ctxt, _AGENT_TASKS, age):
            if instance['host'] in down:
                continue
            LOG.warning('Server %(uuid)s has been %(task)s for over %(age)d '
                        's; its request was lost, %(what)s',
                        {'uuid': instance['uuid'],
                         'task': instance['task_state'],
                         'age': CONF.conductor.task_timeout,
                         'what': 'sending it again'
                         if instance['task_state'] == states.TASK_DELETING
                         else 'clearing it'})
            if instance['task_state'] == states.TASK_DELETING:
                # The same task again: this also restarts its clock.
                instances_db.instance_update(
                    ctxt, instance['uuid'],
                    {'task_state': states.TASK_DELETING})
                self.compute_api.terminate_instance(ctxt, instance['host'],
                                                    instance)
            else:
                instances_db.instance_update(ctxt, instance['uuid'],
                                             {'task_state': None},
                                             expected_task_state=instance[
                                       'task_state'])

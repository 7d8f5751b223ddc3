"""The compute agent's migration runner, without RabbitMQ: the fake
driver's in-memory guests, a real job runner, and the conductor's records
in a real database, reached in-process instead of over RPC."""

import threading
import time

import fixtures
import oslo_messaging as messaging

from tests.unit import in_process
from tests.unit import test_migration_conductor
from volmig import exception
from volmig import states
from volmig.compute import migrations as runner_mod
from volmig.compute.drivers import base as base_driver
from volmig.conductor import start
from volmig.db import instances as instances_db


class MigrationRunnerTest(test_migration_conductor.ConductorTestBase):

    def setUp(self):
        super().setUp()
        deployment = in_process.Deployment(self, self.conductor)
        self.driver, self.runner, self.notes = (
            deployment.driver, deployment.runner, deployment.notes)
        self.agent = deployment.compute
        self.bdm = instances_db.bdm_get_by_attachment(self.ctxt,
                                                      self.src['id'])
        self.driver.spawn({'uuid': self.instance['uuid']}, [self.bdm])

    def disk(self):
        return self.driver.guest_disk(self.instance['uuid'],
                                      self.bdm['volume_id'])

    def start(self):
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        return start.run(self.ctxt, self.agent, self.conductor,
                         begun['migration'], begun['bdm'])

    def wait_for(self, migration_id, status):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = self.conductor.get(self.ctxt, migration_id)
            if found['status'] == status:
                return found
            time.sleep(0.01)
        self.fail('migration %s never became %s; it is %s'
                  % (migration_id, status, found['status']))

    def dst(self):
        return self.volumes.attachment_create(
            self.ctxt, self.volumes.create_volume(self.ctxt, 16)['id'],
            self.instance['uuid'])

    def test_start_puts_the_guest_on_its_overlay(self):
        migration = self.start()
        self.assertEqual(states.STARTED, migration['status'])
        self.assertTrue(self.disk().on_overlay)
        self.assertEqual([runner_mod.START + '.start',
                          runner_mod.START + '.end'], self.notes.sent)

    def test_a_refused_start_leaves_the_guest_on_src(self):
        self.driver.power_off({'uuid': self.instance['uuid']})
        instances_db.instance_update(self.ctxt, self.instance['uuid'],
                                     {'power_state': states.POWER_SHUTDOWN,
                                      'vm_state': states.VM_STOPPED})
        # Shut off, it migrates offline; the guest runs again before the
        # agent hears of it, so the driver refuses.
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        self.assertEqual(states.MODE_OFFLINE, begun['migration']['mode'])
        self.driver.power_on({'uuid': self.instance['uuid']}, [self.bdm])
        self.assertRaises(exception.InstanceMustBeShutOff, start.run,
                          self.ctxt, self.agent, self.conductor,
                          begun['migration'], begun['bdm'])
        failed = self.conductor.get(self.ctxt, begun['migration']['id'])
        self.assertEqual((states.ERROR, False),
                         (failed['status'], failed['recovery_needed']))
        self.assertFalse(self.disk().on_overlay)
        self.assertEqual(runner_mod.START + '.error', self.notes.sent[-1])

    def test_cancel_merges_back_into_src(self):
        migration = self.start()
        accepted = self.conductor.accept_cancel(self.ctxt, self.src['id'])
        self.runner.cancel(self.ctxt, accepted['migration'], accepted['bdm'])
        self.wait_for(migration['id'], states.CANCELLED)
        self.assertFalse(self.disk().on_overlay)
        self.assertEqual(self.src['id'], self.disk().attachment_id)

    def completed(self) -> dict:
        """Start, then complete onto a new volume; returns its
        attachment once the migration is completed."""
        migration = self.start()
        dst = self.dst()
        accepted = self.conductor.accept_complete(self.ctxt, self.src['id'],
                                                  dst['id'])
        self.runner.complete(self.ctxt, accepted['migration'],
                             accepted['bdm'],
                             accepted['dst_connection_info'])
        self.wait_for(migration['id'], states.COMPLETED)
        return dst

    def test_complete_switches_the_guest_and_the_mapping_to_dst(self):
        dst = self.completed()
        self.assertEqual((dst['id'], False),
                         (self.disk().attachment_id, self.disk().on_overlay))
        self.assertEqual(dst['id'], instances_db.bdm_get_by_volume(
            self.ctxt, self.instance['uuid'],
            self.bdm['volume_id'])['attachment_id'])

    def test_a_conductor_away_hears_the_switch_and_the_end_later(self):
        """Its answers are lost twice per question and report, as while
        it restarts: the complete cast's check that it is still current
        is asked again, as is each report, and the commit goes on."""
        self.useFixture(fixtures.MonkeyPatch('volmig.rpc.ASK_AGAIN_FIRST',
                                             0.01))
        told = []
        for name in ('migration_get', 'migration_switched',
                     'migration_job_ended'):
            served = getattr(self.runner.conductor, name)

            def away_twice(ctxt, migration_id, *args, served=served,
                           name=name):
                told.append(name)
                if told.count(name) <= 2:
                    raise messaging.MessagingTimeout('no answer')
                return served(ctxt, migration_id, *args)
            setattr(self.runner.conductor, name, away_twice)
        dst = self.completed()
        self.assertEqual(3, told.count('migration_get'))
        self.assertEqual(3, told.count('migration_switched'))
        self.assertEqual(3, told.count('migration_job_ended'))
        self.assertEqual((dst['id'], False),
                         (self.disk().attachment_id, self.disk().on_overlay))

    def test_a_stale_cast_changes_nothing(self):
        migration = self.start()
        dst = self.dst()
        accepted = self.conductor.accept_complete(self.ctxt, self.src['id'],
                                                  dst['id'])
        # A cancel sent while it was started, delivered after the complete
        # was accepted: the agent ignores it.
        self.runner.cancel(self.ctxt, migration, accepted['bdm'])
        self.assertTrue(self.disk().on_overlay)
        self.assertEqual(states.COMPLETING, self.conductor.get(
            self.ctxt, migration['id'])['status'])

    def test_a_complete_again_while_a_job_of_it_runs_changes_nothing(self):
        """As while the first complete's refused switch merges the guest
        back into src: the job ends the migration, not a second switch."""
        migration = self.start()
        dst = self.dst()
        accepted = self.conductor.accept_complete(self.ctxt, self.src['id'],
                                                  dst['id'])
        merging = threading.Event()

        class Merge(base_driver.Job):
            def poll(self):
                return base_driver.JobProgress(0, 1, merging.is_set())
        self.runner.jobs.submit(migration['id'], Merge(), lambda p: None,
                                lambda exc: None)
        self.addCleanup(merging.set)
        self.runner.complete(self.ctxt, accepted['migration'],
                             accepted['bdm'],
                             accepted['dst_connection_info'])
        self.assertEqual((self.src['id'], True),
                         (self.disk().attachment_id, self.disk().on_overlay))
        self.assertEqual(states.COMPLETING, self.conductor.get(
            self.ctxt, migration['id'])['status'])

    def test_an_unanswered_start_is_rolled_back_when_reconciled(self):
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        migration = begun['migration']
        # The agent put the guest on its overlay and died before it
        # answered: a new process finds the migration starting.
        self.driver.migration_start({'uuid': self.instance['uuid']},
                                    begun['bdm'], migration)
        self.runner.reconcile(self.ctxt, migration, begun['bdm'], None)
        failed = self.wait_for(migration['id'], states.ERROR)
        self.assertIn('stopped before it answered', failed['error_reason'])
        self.assertFalse(failed['recovery_needed'])
        self.assertFalse(self.disk().on_overlay)

    def test_a_start_this_process_answered_is_not_rolled_back(self):
        migration = self.start()
        starting = dict(migration, status=states.STARTING)
        self.runner.reconcile(self.ctxt, starting, self.bdm, None)
        self.assertTrue(self.disk().on_overlay)
        self.assertEqual(states.STARTED, self.conductor.get(
            self.ctxt, migration['id'])['status'])

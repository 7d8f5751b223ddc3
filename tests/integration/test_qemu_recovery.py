"""The compute agent SIGKILLed at every step its journal records.

Each test runs the agent under ``crash_at``, which kills it the moment its
journal records one step of start, complete or cancel. The guest keeps
writing while its agent is dead; then the real agent starts again and
reconciles. Every test checks three things: the migration reaches the
terminal status the block-storage client expects; the volume file holds
every acknowledged write, byte for byte; and no overlay, journal entry
or task state is left behind.
"""

import os
import signal

import oslo_messaging as messaging
import testscenarios

from tests.integration import test_qemu_data_path as data_path
from volmig import exception
from volmig import states

COMPLETE_STEPS = ('switch', 'reopen', 'release_src', 'commit',
                  'job_complete', 'drop_overlay')
CANCEL_STEPS = ('commit', 'job_complete', 'drop_overlay')

load_tests = testscenarios.load_tests_apply_scenarios


class RecoveryTestCase(data_path.QemuTestCase):

    def options(self):
        options = super().options()
        # A start whose agent dies must fail in a test's time.
        options[('DEFAULT', 'rpc_response_timeout')] = 15
        return options

    def agent_died_and_restarted(self, writer, number: int) -> int:
        """Write while the agent is dead, bring it back, write again."""
        self.cluster.wait_for_death('compute-1')
        number = self.write_some(writer, 20, number)
        self.cluster.restart('compute-1')
        return self.write_some(writer, 20, number)

    def complete_retrying(self, bdm, attachment) -> dict:
        """Complete, as a caller retries a call lost to a broker fault."""
        def complete():
            try:
                return self.client.complete(self.ctxt, bdm['attachment_id'],
                                            attachment['id'], wait=False)
            except (messaging.MessagingTimeout, exception.ServiceTimeout):
                # Lost between the caller and volmig-api, or between
                # volmig-api and the conductor (a 503 "try again").
                return None
        return self.wait_until(complete, timeout=120,
                               what='complete to be accepted')

    def started_under_writes(self):
        """A guest that writes, and a migration of its volume started
        between writes; returns (server, bdm, vol, writer, number,
        migration)."""
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 20)
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        number = self.write_some(writer, 20, number)
        return server, bdm, vol, writer, number, migration

    def assert_nothing_left(self, server, migration) -> None:
        self.assertEqual([], self.overlays(server))
        jobs = os.path.join(self.state_path, 'compute', 'jobs')
        self.assertEqual([], os.listdir(jobs))
        self.assertIsNone(self.conductor.instance_get(
            self.admin, server['uuid'])['task_state'])
        self.assertIn(self.client.get(self.ctxt, migration['id'])['status'],
                      states.TERMINAL)


class CompleteCrashTest(RecoveryTestCase):

    scenarios = [(step, {'step': step}) for step in COMPLETE_STEPS]

    def test_agent_killed_during_complete(self):
        self.crash_agent_at('complete:%s' % self.step)
        server, bdm, vol, writer, number, migration = (
            self.started_under_writes())
        qemu_pid = self.qemu_pid(server)
        dst, attachment = self.copy_to_dst(server, bdm, vol)

        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'], wait=False)
        number = self.agent_died_and_restarted(writer, number)
        ended = self.client.wait_for(self.ctxt, migration['id'],
                                     states.COMPLETED)
        self.write_some(writer, 20, number)

        self.assertEqual(qemu_pid, self.qemu_pid(server))
        if self.step in ('switch', 'reopen'):
            # The switch was redone, so its pause was measured; after it,
            # the measurement died with the agent.
            self.assertIn('switch', ended['pauses_ms'])
        self.assert_image(dst['path'], writer)
        self.assert_nothing_left(server, migration)
        [after] = self.conductor.instance_get(
            self.admin, server['uuid'])['block_devices']
        self.assertEqual(attachment['id'], after['attachment_id'])


class CancelCrashTest(RecoveryTestCase):

    scenarios = [(step, {'step': step}) for step in CANCEL_STEPS]

    def test_agent_killed_during_cancel(self):
        self.crash_agent_at('cancel:%s' % self.step)
        server, bdm, vol, writer, number, migration = (
            self.started_under_writes())

        self.client.cancel(self.ctxt, bdm['attachment_id'])
        number = self.agent_died_and_restarted(writer, number)
        self.client.wait_for(self.ctxt, migration['id'], states.CANCELLED)
        self.write_some(writer, 20, number)

        self.assert_image(vol['path'], writer)
        self.assert_nothing_left(server, migration)


class StartCrashTest(RecoveryTestCase):

    def test_agent_killed_during_start_rolls_back_to_src(self):
        self.crash_agent_at('start:snapshot')
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 20)

        exc = self.assertRaises(exception.ComputeUnavailable,
                                self.client.start, self.ctxt,
                                bdm['attachment_id'])
        self.assertNotIn('Traceback', exc.message)
        [migration] = self.client.list(self.ctxt,
                                       instance_uuid=server['uuid'])
        number = self.agent_died_and_restarted(writer, number)

        def rolled_back():
            found = self.client.get(self.ctxt, migration['id'])
            # The healer may fail it first, with recovery_needed, while
            # the agent is away; the agent's recovery then clears that.
            return (found if found['status'] == states.ERROR
                    and not found['recovery_needed'] else None)
        failed = self.wait_until(rolled_back, what='the start rolled back')
        self.assertIn('on src', failed['error_reason'])
        self.write_some(writer, 20, number)

        self.assert_image(vol['path'], writer)
        self.assert_nothing_left(server, migration)
        # The attachment can be migrated again.
        again = self.client.start(self.ctxt, bdm['attachment_id'])
        self.assertEqual(states.STARTED, again['status'])
        self.client.cancel(self.ctxt, bdm['attachment_id'])
        self.client.wait_for(self.ctxt, again['id'], states.CANCELLED)


class QemuDeathTest(RecoveryTestCase):
    """QEMU itself SIGKILLed at a step: the overlay is merged on disk.

    The guest's writes are flushed before the fault, as a guest's
    acknowledged writes are; unflushed qcow2 metadata dies with QEMU.
    The server is left shut off, with its data whole on the side the
    migration ended on.
    """

    scenarios = [
        # (fault, status the client sees, the side the data is on)
        ('complete:reopen', {'fault': 'complete:reopen',
                             'final': states.ERROR, 'side': 'src'}),
        ('complete:release_src', {'fault': 'complete:release_src',
                                  'final': states.ERROR, 'side': 'src'}),
        ('complete:commit', {'fault': 'complete:commit',
                             'final': states.COMPLETED, 'side': 'dst'}),
        ('complete:job_complete', {'fault': 'complete:job_complete',
                                   'final': states.COMPLETED,
                                   'side': 'dst'}),
        ('complete:drop_overlay', {'fault': 'complete:drop_overlay',
                                   'final': states.COMPLETED,
                                   'side': 'dst'}),
        ('cancel:commit', {'fault': 'cancel:commit',
                           'final': states.CANCELLED, 'side': 'src'}),
        ('cancel:job_complete', {'fault': 'cancel:job_complete',
                                 'final': states.CANCELLED, 'side': 'src'}),
    ]

    def test_qemu_killed_mid_migration(self):
        self.crash_agent_at('--qemu', self.fault)
        server, bdm, vol, writer, _, migration = (
            self.started_under_writes())
        writer.flush()
        dst, attachment = self.copy_to_dst(server, bdm, vol)

        if self.fault.startswith('complete:'):
            self.client.complete(self.ctxt, bdm['attachment_id'],
                                 attachment['id'], wait=False)
        else:
            self.client.cancel(self.ctxt, bdm['attachment_id'])
        ended = self.client.wait_for(self.ctxt, migration['id'],
                                     self.final)

        self.assertIsNone(self.qemu_pid(server))
        self.assertFalse(ended['recovery_needed'])
        self.assert_image(dst['path'] if self.side == 'dst'
                          else vol['path'], writer)
        self.assert_nothing_left(server, migration)
        stopped = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual((states.VM_STOPPED, states.POWER_SHUTDOWN),
                         (stopped['vm_state'], stopped['power_state']))



class QemuDiedWhileStartedTest(RecoveryTestCase):

    def test_qemu_killed_while_started_then_complete(self):
        server, bdm, vol, writer, _, migration = (
            self.started_under_writes())
        writer.flush()
        os.kill(self.qemu_pid(server), 9)
        self.wait_until(lambda: self.qemu_pid(server) is None,
                        what='QEMU to die')
        dst, attachment = self.copy_to_dst(server, bdm, vol)

        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'])
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        self.assert_image(dst['path'], writer)
        self.assert_nothing_left(server, migration)
        # The server starts again, on dst.
        self.conductor.start_instance(self.user, server['uuid'])
        self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        after = self.writer(server, vol)
        self.write_some(after, 20, 100)
        self.assert_image(dst['path'], writer, after)


class OtherServicesCrashTest(RecoveryTestCase):
    """The other services die mid-migration; the guest never notices."""

    def test_volume_service_killed_mid_copy(self):
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 20)
        # 16 MiB at 2 MiB/s: the copy is under way for seconds.
        self.volumes.migrate_volume(self.admin, vol['id'], 'pool-b',
                                    max_bandwidth_mbps=2)
        self.wait_until(lambda: self.volumes.get_volume(
            self.admin, vol['id'])['migration_progress'] > 0,
            what='the copy to begin')
        number = self.write_some(writer, 20, number)

        self.cluster.restart('volume', sig=signal.SIGKILL)
        number = self.write_some(writer, 20, number)
        moved = self.wait_for_volume(vol['id'], {'success', 'error'})
        self.assertEqual('success', moved['migration_status'],
                         moved.get('migration_error'))
        self.write_some(writer, 20, number)

        [migration_id] = moved['migration_ids']
        self.client.wait_for(self.ctxt, migration_id, states.COMPLETED)
        self.assertEqual('pool-b', moved['pool'])
        self.assertFalse(os.path.exists(vol['path']))
        # No orphan: pool-b holds the volume and nothing else.
        self.assertEqual([os.path.basename(moved['path'])],
                         os.listdir(os.path.dirname(moved['path'])))
        self.assert_image(moved['path'], writer)
        self.assert_nothing_left(server, {'id': migration_id})

    def test_conductor_killed_during_complete(self):
        server, bdm, vol, writer, number, migration = (
            self.started_under_writes())
        dst, attachment = self.copy_to_dst(server, bdm, vol)

        self.client.complete(self.ctxt, bdm['attachment_id'],
                             attachment['id'], wait=False)
        self.cluster.restart('conductor', sig=signal.SIGKILL)
        number = self.write_some(writer, 20, number)
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED,
                             timeout=120)
        self.write_some(writer, 20, number)

        self.assert_image(dst['path'], writer)
        self.assert_nothing_left(server, migration)

    def test_every_broker_connection_closed_mid_migration(self):
        server, bdm, vol, writer, number, migration = (
            self.started_under_writes())

        closed = self.vhost.close_connections()
        self.assertGreater(closed, 0)
        number = self.write_some(writer, 20, number)
        dst, attachment = self.copy_to_dst(server, bdm, vol)
        # The services reconnect; this call may need the retry a caller
        # makes after a timeout.
        self.complete_retrying(bdm, attachment)
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED,
                             timeout=120)
        self.write_some(writer, 20, number)

        self.assert_image(dst['path'], writer)
        self.assert_nothing_left(server, migration)


class SwapCrashTest(RecoveryTestCase):
    """The legacy swap, its agent killed at each step it journals."""

    scenarios = [
        # (step, the volume the guest ends on)
        ('mirror', {'step': 'mirror', 'swapped': False}),
        ('pivot', {'step': 'pivot', 'swapped': True}),
        ('release_old', {'step': 'release_old', 'swapped': True}),
    ]

    def test_agent_killed_during_swap(self):
        self.crash_agent_at('swap:%s' % self.step)
        server, bdm, vol = self.boot()
        writer = self.writer(server, vol)
        number = self.write_some(writer, 40)
        new = self.volumes.create_volume(self.admin, data_path.SIZE_MB,
                                         pool='pool-b')

        self.conductor.swap_volume(self.admin, server['uuid'], vol['id'],
                                   new['id'])
        number = self.agent_died_and_restarted(writer, number)
        self.wait_for_server(server['uuid'], states.VM_ACTIVE)
        self.write_some(writer, 20, number)

        [after] = self.conductor.instance_get(
            self.admin, server['uuid'])['block_devices']
        kept, dropped = (new, vol) if self.swapped else (vol, new)
        self.assertEqual(kept['id'], after['volume_id'])
        self.assert_image(kept['path'], writer)
        self.assertEqual([], self.volumes.get_volume(
            self.admin, dropped['id'])['attachments'])
        self.assertEqual(['attached'], [
            a['attach_status'] for a in self.volumes.get_volume(
                self.admin, kept['id'])['attachments']])
        jobs = os.path.join(self.state_path, 'compute', 'jobs')
        self.assertEqual([], os.listdir(jobs))

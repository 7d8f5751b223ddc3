"""Requests racing for one migration: the database picks one winner."""

import functools
import threading
import time

import fixtures
from oslo_utils import uuidutils
import sqlalchemy as sa

from tests.functional import base
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import locks


def race(*calls):
    """Run the calls at once; returns each one's result or exception."""
    results: list = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(index, call):
        barrier.wait()
        try:
            results[index] = call()
        except Exception as exc:
            results[index] = exc

    threads = [threading.Thread(target=run, args=(index, call))
               for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def waiting_on_lock(engine) -> None:
    """Return once a transaction waits on an advisory lock (PostgreSQL),
    or after a moment (SQLite, where the waiter cannot be seen: the other
    transaction's BEGIN waits in the driver)."""
    if engine.dialect.name != 'postgresql':
        time.sleep(1)
        return
    query = sa.text("SELECT count(*) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND NOT granted")
    for _ in range(600):
        with engine.connect() as connection:
            if connection.execute(query).scalar():
                return
        time.sleep(0.05)
    raise AssertionError('no transaction waited on the volume\'s lock')


class MigrationRaceTest(base.ServicesTestCase):

    def test_two_starts_of_one_attachment_make_one_migration(self):
        server, bdm = self.create_server()
        results = race(*[lambda: self.client.start(
            self.ctxt, bdm['attachment_id'])] * 4)

        [migration] = self.client.list(self.ctxt,
                                       instance_uuid=server['uuid'])
        for result in results:
            if isinstance(result, Exception):
                # Lost to the winner while it was starting.
                self.assertIsInstance(result, exception.MigrationInProgress)
            else:
                self.assertEqual(migration['id'], result['id'])
        self.assertIn(migration['id'], [r['id'] for r in results
                                        if isinstance(r, dict)])
        self.assertEqual(states.STARTED, migration['status'])

    def test_complete_racing_cancel(self):
        """20 rounds; after each, the loser changed nothing: a refused
        complete leaves its dst attachment as the block-storage service
        made it (reserved, no connector)."""
        for _ in range(20):
            server, bdm = self.create_server()
            migration = self.client.start(self.ctxt, bdm['attachment_id'])
            dst = self.dst_attachment(server, bdm)
            complete, cancel = race(
                functools.partial(self.client.complete, self.ctxt,
                                  bdm['attachment_id'], dst['id'],
                                  wait=False),
                functools.partial(self.client.cancel, self.ctxt,
                                  bdm['attachment_id']))

            won = [r for r in (complete, cancel) if isinstance(r, dict)]
            lost = [r for r in (complete, cancel) if isinstance(r, Exception)]
            self.assertEqual(1, len(won), (complete, cancel))
            self.assertIsInstance(lost[0], exception.InvalidMigrationState)
            self.assertNotIn('Traceback', lost[0].message)
            final = (states.COMPLETED if won[0] is complete
                     else states.CANCELLED)
            self.client.wait_for(self.ctxt, migration['id'], final)
            server = self.conductor.instance_get(self.admin, server['uuid'])
            [now] = server['block_devices']
            self.assertIsNone(server['task_state'])
            disk = self.fake_disk(server, now)
            self.assertFalse(disk.on_overlay)
            attachment = self.volumes.attachment_get(self.admin, dst['id'])
            if final == states.COMPLETED:
                self.assertEqual((dst['id'], dst['id']),
                                 (now['attachment_id'],
                                  disk.attachment_id))
                self.assertEqual('attached', attachment['attach_status'])
            else:
                self.assertEqual((bdm['attachment_id'],
                                  bdm['attachment_id']),
                                 (now['attachment_id'],
                                  disk.attachment_id))
                self.assertEqual(('reserved', None),
                                 (attachment['attach_status'],
                                  attachment['connector']))

    def test_a_complete_whose_dst_cannot_connect_changes_nothing(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        dst = self.dst_attachment(server, bdm)
        conductor = self.services['conductor-host'].manager.migrations
        # The block-storage service fails at the one call that connects.
        with fixtures.MockPatchObject(
                conductor.volume_api, 'attachment_update',
                side_effect=exception.BlockStorageUnavailable(
                    action='update attachment %s' % dst['id'],
                    reason='it is down')):
            error = self.assertRaises(exception.BlockStorageUnavailable,
                                      self.client.complete, self.ctxt,
                                      bdm['attachment_id'], dst['id'],
                                      wait=False)
        self.assertIn(dst['id'], error.message)
        current = self.client.get(self.ctxt, migration['id'])
        self.assertEqual((states.STARTED, None),
                         (current['status'], current['dst_attachment_id']))
        # Once it is back, the same complete goes through.
        self.client.complete(self.ctxt, bdm['attachment_id'], dst['id'],
                             wait=False)
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)

    def test_detach_and_delete_during_complete_are_refused(self):
        server, bdm = self.create_server()
        migration = self.client.start(self.ctxt, bdm['attachment_id'])
        dst = self.dst_attachment(server, bdm)
        complete, detach, delete = race(
            lambda: self.client.complete(self.ctxt, bdm['attachment_id'],
                                         dst['id'], wait=False),
            lambda: self.conductor.detach_volume(self.user, server['uuid'],
                                                 bdm['volume_id']),
            lambda: self.conductor.delete_instance(self.user,
                                                   server['uuid']))
        self.assertIsInstance(complete, dict)
        for refused in (detach, delete):
            self.assertIsInstance(refused, exception.InstanceInvalidState)
        self.client.wait_for(self.ctxt, migration['id'], states.COMPLETED)
        server = self.conductor.instance_get(self.admin, server['uuid'])
        self.assertEqual([dst['id']], [b['attachment_id']
                                       for b in server['block_devices']])

    def test_attach_racing_a_start_never_forks_the_volume(self):
        """20 rounds or more, each side given a head start in turn; after
        each, the attach is in the volume's records everywhere or nowhere,
        and a migration began only if the attach was refused; each side
        wins at least once."""
        [other] = self.conductor.build_instances(self.user, 'other', [], 1,
                                                 None)
        self.wait_for_server(other['uuid'], states.VM_ACTIVE)
        outcomes = set()
        round_ = 0
        # Until each side has won once, 20 rounds at least: on a loaded
        # machine the start won all of 20 at head starts up to 40 ms, so
        # rounds past 20 give each side ten and twenty times as long.
        while round_ < 20 or (len(outcomes) < 2 and round_ < 60):
            server, bdm = self.create_server(multiattach=True)
            head_start = round_ // 2 % 5 * 0.01 * (1 + round_ // 20 * 10)
            start, attach = race(
                functools.partial(
                    self.after, head_start * (round_ % 2), self.client.start,
                    self.ctxt, bdm['attachment_id']),
                functools.partial(
                    self.after, head_start * (1 - round_ % 2),
                    self.conductor.attach_volume, self.user, other['uuid'],
                    bdm['volume_id'], 'rw'))
            won = [r for r in (start, attach) if isinstance(r, dict)]
            self.assertEqual(1, len(won), (start, attach))
            for result in (start, attach):
                if isinstance(result, Exception):
                    self.assertIsInstance(result, exception.VolmigException)
                    self.assertLess(result.code, 500, result.message)
                    self.assertNotIn('Traceback', result.message)
            if isinstance(start, Exception):
                # The attach came first: two writers, both running.
                self.assertIsInstance(start, (
                    exception.MultiattachMigrationNotSupported,
                    exception.MigrationInProgress))
                self.assertEqual([], self.client.list(
                    self.ctxt, instance_uuid=server['uuid']))
            else:
                # The start came first: new attachments wait for it.
                self.assertIsInstance(attach, exception.MigrationInProgress)
            self.assert_one_view(bdm['volume_id'],
                                 {server['uuid']} | ({other['uuid']}
                                                     if attach is won[0]
                                                     else set()))
            outcomes.add(start is won[0])
            round_ += 1
        self.assertEqual({True, False}, outcomes)

    def test_racing_attaches_of_a_single_attach_volume_one_wins(self):
        """Six servers, two attaches each, at once: one attach wins, the
        others are refused in a 4xx, and every record agrees."""
        servers = [self.create_server()[0] for _ in range(6)]
        volume = self.volumes.create_volume(self.admin, 16)
        results = race(*[functools.partial(
            self.conductor.attach_volume, self.user, server['uuid'],
            volume['id'], 'rw') for server in servers for _ in range(2)])

        won = [r for r in results if isinstance(r, dict)]
        self.assertEqual(1, len(won), results)
        for result in results:
            if isinstance(result, Exception):
                self.assertIsInstance(result, exception.VolmigException)
                self.assertLess(result.code, 500, result.message)
                self.assertNotIn('Traceback', result.message)
        self.assertIn(won[0]['instance_uuid'], [s['uuid'] for s in servers])
        self.assert_one_view(volume['id'], {won[0]['instance_uuid']})
        for server in servers:
            self.assertIsNone(self.conductor.instance_get(
                self.admin, server['uuid'])['task_state'])

    @staticmethod
    def after(delay, call, *args):
        time.sleep(delay)
        return call(*args)

    def assert_one_view(self, volume_id: str, servers: set) -> None:
        """Block storage's attachments and volmig's mappings name the
        same servers, none of them half attached."""
        volume = self.volumes.get_volume(self.admin, volume_id)
        self.assertEqual(servers, {a['instance_uuid']
                                   for a in volume['attachments']})
        self.assertEqual(['attached'] * len(servers),
                         [a['attach_status'] for a in volume['attachments']])
        mappings = instances_db.bdm_get_all(self.admin, volume_id=volume_id)
        self.assertEqual(servers, {m['instance_uuid'] for m in mappings})

    def _other_mapping(self, other: dict, bdm: dict) -> dict:
        """A mapping that another conductor's attach recorded, of which
        block storage's view of the volume knows nothing yet."""
        return {'instance_uuid': other['uuid'], 'volume_id': bdm['volume_id'],
                'attachment_id': uuidutils.generate_uuid(),
                'attach_mode': 'rw', 'device_name': '/dev/vdb'}

    def assert_nothing_started(self, server: dict, exc: Exception,
                               other: dict) -> None:
        self.assertIsInstance(exc, exception.MigrationInProgress)
        self.assertIn(other['uuid'], exc.message)
        self.assertEqual([], self.client.list(
            self.ctxt, instance_uuid=server['uuid']))
        self.assertIsNone(self.conductor.instance_get(
            self.admin, server['uuid'])['task_state'])

    def test_a_start_gives_way_to_an_attach_it_did_not_see(self):
        """Block storage was read before an attach; the attach's mapping
        was recorded before the start decided: the start gives way."""
        server, bdm = self.create_server(multiattach=True)
        [other] = self.conductor.build_instances(self.user, 'other', [], 1,
                                                 None)
        self.wait_for_server(other['uuid'], states.VM_ACTIVE)
        instances_db.bdm_create(self.admin, self._other_mapping(other, bdm))
        exc = self.assertRaises(exception.MigrationInProgress,
                                self.client.start, self.ctxt,
                                bdm['attachment_id'])
        self.assert_nothing_started(server, exc, other)

    def test_a_start_waits_for_an_attach_holding_the_volume(self):
        """What several conductors need: the database, not a lock of one
        process, settles an attach against a start. Another conductor's
        attach holds the volume's lock, its mapping not yet committed; the
        start waits for it and then sees the mapping."""
        server, bdm = self.create_server(multiattach=True)
        [other] = self.conductor.build_instances(self.user, 'other', [], 1,
                                                 None)
        self.wait_for_server(other['uuid'], states.VM_ACTIVE)
        held, release = threading.Event(), threading.Event()

        def attach_holding_the_lock():
            # A context of its own: the transaction is kept on it.
            ctxt = volmig_context.get_admin_context()
            with db.transaction(ctxt) as session:
                locks.lock_volume(session, bdm['volume_id'])
                instances_db.bdm_create(ctxt, self._other_mapping(other, bdm))
                held.set()
                release.wait(30)

        holder = threading.Thread(target=attach_holding_the_lock)
        holder.start()
        self.addCleanup(holder.join)
        self.addCleanup(release.set)
        held.wait(30)
        results: list = []

        def start():
            try:
                self.client.start(self.ctxt, bdm['attachment_id'])
            except exception.VolmigException as exc:
                results.append(exc)

        starter = threading.Thread(target=start)
        starter.start()
        waiting_on_lock(db.get_engine())
        release.set()
        starter.join()
        self.assertEqual(1, len(results), 'the start went on')
        self.assert_nothing_started(server, results[0], other)

"""The schema and the data layer's guarantees, on the test database."""

import threading

from alembic import autogenerate
from alembic import migration as alembic_migration
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import engines
from oslotest import base
import sqlalchemy as sa

from tests import fixtures
from volmig import context as volmig_context
from volmig import exception
from volmig import states
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import models
from volmig.db import schema
from volmig.db import services as service_db
from volmig.db import starts


class DatabaseTestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.ConfFixture())
        self.useFixture(fixtures.DatabaseFixture())
        self.ctxt = volmig_context.get_admin_context()


class SchemaTest(DatabaseTestCase):

    def test_migrations_build_the_schema_of_the_models(self):
        # DatabaseFixture built the schema with the alembic migrations.
        self.assertIsNotNone(schema.head_revision())
        self.assertEqual(schema.head_revision(),
                         schema.current_revision())
        with db.get_engine().connect() as connection:
            context = alembic_migration.MigrationContext.configure(
                connection, opts={'compare_type': True,
                                  'include_object': self._modelled})
            diff = autogenerate.compare_metadata(context,
                                                 models.Base.metadata)
        self.assertEqual([], diff)

    @staticmethod
    def _modelled(item, name, kind, reflected, compare_to):
        # MySQL's form of the two partial indexes is the migration's
        # alone (alembic 0010): the models give the partial form.
        guards = models.MYSQL_GUARDS
        return not (name in guards or kind == 'column' and name in {
            column for column, _ in guards.values()})


class UpgradeTest(base.BaseTestCase):

    def test_ended_migrations_stay_ended_across_the_upgrade(self):
        # A database of the release before: one migration ended, one in
        # progress (on MySQL, 0003's indexes held the ended one's keys).
        self.useFixture(fixtures.ConfFixture())
        self.useFixture(fixtures.DatabaseFixture(revision='0009'))
        ctxt = volmig_context.get_admin_context()
        values = {'instance_uuid': 'i-1', 'volume_id': 'v', 'host': 'h',
                  'mode': 'live', 'bytes_done': 0, 'bytes_total': 0,
                  'recovery_needed': False, 'exclusive': True}
        with db.get_engine().begin() as connection:
            connection.execute(sa.insert(models.VolumeMigration), [
                dict(values, uuid='m-1', src_attachment_id='a',
                     status=states.COMPLETED),
                dict(values, uuid='m-2', src_attachment_id='b',
                     volume_id='w', status=states.STARTED)])
        schema.upgrade()
        # The ended one's attachment and volume may migrate again; the
        # one in progress still holds its own.
        db.migration_create(ctxt, dict(values, uuid='m-3',
                                       src_attachment_id='a'))
        self.assertRaises(exception.MigrationInProgress,
                          db.migration_create, ctxt,
                          dict(values, uuid='m-4', src_attachment_id='b',
                               volume_id='w'))


class InstanceTaskStateTest(DatabaseTestCase):

    def setUp(self):
        super().setUp()
        instances_db.instance_create(self.ctxt, {
            'uuid': 'i-1', 'name': 'vm', 'host': 'h', 'vm_state': 'active',
            'power_state': 'running'})

    def test_compare_and_swap(self):
        instances_db.instance_update(self.ctxt, 'i-1',
                                     {'task_state': states.TASK_POWERING_OFF},
                                     expected_task_state=None)
        exc = self.assertRaises(exception.InstanceInvalidState,
                                instances_db.instance_update, self.ctxt, 'i-1',
                                {'task_state': states.TASK_DELETING},
                                expected_task_state=None)
        self.assertIn(states.TASK_POWERING_OFF, str(exc))
        self.assertEqual(states.TASK_POWERING_OFF, instances_db.instance_get(
            self.ctxt, 'i-1')['task_state'])

    def test_begin_migration_locks_the_instance_atomically(self):
        values = {'uuid': 'm-1', 'instance_uuid': 'i-1', 'volume_id': 'v',
                  'src_attachment_id': 'a', 'host': 'h', 'mode': 'live'}
        migration = starts.record(self.ctxt, values)
        self.assertEqual(states.ACCEPTED, migration['status'])
        self.assertEqual('m-1', migration['id'])
        self.assertRaises(exception.InstanceInvalidState,
                          starts.record, self.ctxt,
                          dict(values, uuid='m-2'))
        # The refused second start left no record behind.
        self.assertEqual(['m-1'], [m['id'] for m in
                                   db.migration_get_all(self.ctxt)])

    def test_migration_update_only_from_expected_status(self):
        db.migration_create(self.ctxt, {
            'uuid': 'm-1', 'instance_uuid': 'i-1', 'volume_id': 'v',
            'src_attachment_id': 'a', 'host': 'h', 'mode': 'live'})
        self.assertRaises(exception.InvalidMigrationState,
                          db.migration_update, self.ctxt, 'm-1',
                          {'status': states.STARTED},
                          expected_status=states.STARTING)
        self.assertEqual(states.ACCEPTED,
                         db.migration_get(self.ctxt, 'm-1')['status'])

    def test_every_status_write_passes_the_state_machine(self):
        migration = db.migration_create(self.ctxt, {
            'uuid': 'm-1', 'instance_uuid': 'i-1', 'volume_id': 'v',
            'src_attachment_id': 'a', 'host': 'h', 'mode': 'live',
            'status': states.STARTING, 'owner': 'volmig-api:h:g'})
        # A status written blind, with no status to swap from, is refused.
        exc = self.assertRaises(exception.InvalidInput, db.migration_update,
                                self.ctxt, 'm-1', {'status': states.STARTED})
        self.assertIn('needs the status it replaces', str(exc))
        # A move the state machine has no edge for changes nothing, even
        # from the status the row is in.
        exc = self.assertRaises(exception.InvalidMigrationState,
                                db.migration_update, self.ctxt, 'm-1',
                                {'status': states.COMPLETED, 'owner': None},
                                expected_status=states.STARTING)
        self.assertIn('move to completed', str(exc))
        self.assertEqual(migration, db.migration_get(self.ctxt, 'm-1'))
        # An allowed one returns the row as written.
        moved = db.migration_update(self.ctxt, 'm-1',
                                    {'status': states.STARTED, 'owner': None},
                                    expected_status=states.STARTING)
        self.assertEqual((states.STARTED, None),
                         (moved['status'], moved['owner']))
        self.assertEqual(moved, db.migration_get(self.ctxt, 'm-1'))

    def test_a_migration_begins_only_in_a_first_status(self):
        for status in sorted(states.ALL - states.INITIAL):
            exc = self.assertRaises(
                exception.InvalidInput, db.migration_create, self.ctxt, {
                    'uuid': 'm-' + status, 'instance_uuid': 'i-1',
                    'volume_id': 'v', 'src_attachment_id': 'a', 'host': 'h',
                    'mode': 'live', 'status': status})
            self.assertIn('cannot begin %s' % status, str(exc))
        self.assertEqual([], db.migration_get_all(self.ctxt))

    def test_one_migration_in_progress_per_attachment(self):
        values = {'instance_uuid': 'i-1', 'volume_id': 'v',
                  'src_attachment_id': 'a', 'host': 'h', 'mode': 'live'}
        db.migration_create(self.ctxt, dict(values, uuid='m-1'))
        # Past the conductor's checks, as a second conductor could be.
        exc = self.assertRaises(exception.MigrationInProgress,
                                db.migration_create, self.ctxt,
                                dict(values, uuid='m-2'))
        self.assertIn('attachment a', str(exc))
        # Nor another attachment of the same volume, unless siblings.
        self.assertRaises(exception.MigrationInProgress,
                          db.migration_create, self.ctxt,
                          dict(values, uuid='m-2', src_attachment_id='b'))
        # Once it has ended, the attachment may be migrated again.
        db.migration_update(self.ctxt, 'm-1', {'status': states.ERROR},
                            expected_status=states.ACCEPTED)
        db.migration_create(self.ctxt, dict(values, uuid='m-3'))
        self.assertEqual(['m-1', 'm-3'], [m['id'] for m in
                                          db.migration_get_all(self.ctxt)])

    def test_progress_never_goes_backwards(self):
        db.migration_create(self.ctxt, {
            'uuid': 'm-1', 'instance_uuid': 'i-1', 'volume_id': 'v',
            'src_attachment_id': 'a', 'host': 'h', 'mode': 'live'})
        for done in (5, 9, 7):
            # A report read before another's commit writes a lower
            # figure after it: the statement keeps the greater.
            written = db.migration_update(
                self.ctxt, 'm-1', {'bytes_done': done, 'bytes_total': 10})
        self.assertEqual((9, 10), (written['bytes_done'],
                                   written['bytes_total']))

    def test_sibling_migrations_of_a_shared_volume(self):
        values = {'instance_uuid': 'i-1', 'volume_id': 'v', 'host': 'h',
                  'mode': 'live', 'exclusive': False}
        for attachment in ('a', 'b', 'c'):
            db.migration_create(self.ctxt, dict(
                values, uuid='m-' + attachment,
                src_attachment_id=attachment))
        self.assertEqual(3, len(db.migration_get_all(self.ctxt,
                                                     volume_id='v')))

    def test_unknown_records(self):
        self.assertRaises(exception.InstanceNotFound,
                          instances_db.instance_get, self.ctxt, 'nope')
        self.assertRaises(exception.MigrationNotFound, db.migration_get,
                          self.ctxt, 'nope')
        self.assertRaises(exception.AttachmentNotFound,
                          instances_db.bdm_get_by_attachment, self.ctxt,
                          'nope')


class ConcurrentWritersTest(DatabaseTestCase):

    def test_threads_writing_at_once_all_succeed(self):
        # On SQLite a read-then-write transaction used to fail at once
        # with "database is locked" when another thread held the lock.
        errors = []

        def heartbeat(host):
            for _ in range(20):
                try:
                    service_db.update(self.ctxt, 'volmig-compute', host,
                                      'volmig-compute', '1.1', {})
                except Exception as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=heartbeat, args=('h%d' % n,))
                   for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        self.assertEqual(4, len(service_db.get_all(self.ctxt)))


class ConflictTest(DatabaseTestCase):
    """A transaction the database gives up for a conflict runs again."""

    def _conflicting(self, conflicts: int, tries: list):
        @db.retried
        def heartbeat(ctxt, host):
            with db.transaction(ctxt):
                tries.append(host)
                service_db.update(ctxt, 'volmig-compute', host,
                                  'volmig-compute', '1.1', {})
                if len(tries) <= conflicts:
                    # What oslo.db raises for InnoDB's 1213, and for a
                    # Galera commit that another node's certified first.
                    raise db_exc.DBDeadlock()
        return heartbeat

    def test_its_own_transaction_runs_again_whole(self):
        tries: list = []
        self._conflicting(2, tries)(self.ctxt, 'h1')
        self.assertEqual(['h1'] * 3, tries)
        # The given-up tries wrote nothing: one record, once.
        self.assertEqual(['h1'], [service['host'] for service in
                                  service_db.get_all(self.ctxt)])

    def test_inside_another_transaction_the_outermost_runs_again(self):
        tries: list = []
        inner = self._conflicting(1, tries)

        @db.retried
        def outer(ctxt):
            with db.transaction(ctxt):
                service_db.update(ctxt, 'volmig-compute', 'h0',
                                  'volmig-compute', '1.1', {})
                inner(ctxt, 'h%d' % len(tries))
        outer(self.ctxt)
        # The inner function did not run again in the transaction given
        # up: the outer one did, and the first try's rows are gone.
        self.assertEqual(['h0', 'h1'], tries)
        self.assertEqual(['h0', 'h1'], [service['host'] for service in
                                        service_db.get_all(self.ctxt)])

    def test_only_a_rereader_runs_again_when_its_status_moved(self):
        def raising(errors, tries):
            def write(ctxt):
                tries.append(True)
                if errors:
                    raise errors.pop(0)
                return 'written'
            return write

        moved = exception.MigrationStatusMoved(
            action='move to started', migration_id='m', status='error')
        tries: list = []
        self.assertEqual('written', db.rereads(
            raising([moved], tries))(self.ctxt))
        self.assertEqual(2, len(tries))
        # A writer that names the status it replaces would find it moved
        # at every try: it gets the conflict at once.
        tries = []
        self.assertRaises(exception.MigrationStatusMoved, db.retried(
            raising([moved], tries)), self.ctxt)
        self.assertEqual(1, len(tries))
        # A move the state machine refuses is no race: refused at once.
        tries = []
        refused = exception.InvalidMigrationState(
            action='move to started', migration_id='m', status='error')
        self.assertRaises(exception.InvalidMigrationState, db.rereads(
            raising([refused], tries)), self.ctxt)
        self.assertEqual(1, len(tries))


class ConnectionTest(DatabaseTestCase):

    def test_transactions_reuse_their_connections(self):
        # oslo.db would open a SQLite file anew for each transaction.
        opened = []
        sa.event.listen(db.get_engine(), 'connect',
                        lambda *args: opened.append(1))
        for _ in range(5):
            service_db.get_all(self.ctxt)
        self.assertLessEqual(len(opened), 1)

    def test_native_threads_do_not_yield_at_each_checkin(self):
        # oslo.db's yield is for green threads (tests run on native ones).
        self.assertNotIn(engines._thread_yield,
                         list(db.get_engine().pool.dispatch.checkin))

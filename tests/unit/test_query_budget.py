"""The statements a start costs the conductor's database, counted.

Each statement is a round trip to the database server; start's latency
budget (a few bare RPC calls) leaves room for about six. Transaction
control (BEGIN, COMMIT) is not counted, and neither are the block-storage
service's own reads of its volume (another service in a deployment:
volmig-volume over RPC, or Cinder over HTTP; the fake adapter reads them
from this database).
"""

import datetime
import re

from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy import orm

from tests.unit import test_migration_conductor
from volmig import exception
from volmig import metrics
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import migrations
from volmig.conductor import services
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import models
from volmig.db import services as service_db

BLOCK_STORAGE = re.compile(r'\bFROM (volumes|volume_attachments)\b')
CONTROL = ('BEGIN', 'COMMIT', 'ROLLBACK', 'SAVEPOINT', 'RELEASE')


class QueryBudgetTest(test_migration_conductor.ConductorTestBase):

    def setUp(self):
        super().setUp()
        self.statements, self.sent = [], []
        engine = db.get_engine()
        sa.event.listen(engine, 'before_cursor_execute', self._seen)
        self.addCleanup(sa.event.remove, engine, 'before_cursor_execute',
                        self._seen)

    def _seen(self, conn, cursor, statement, params, context, many):
        if statement.lstrip().upper().startswith(CONTROL):
            return
        self.sent.append(statement)
        if not BLOCK_STORAGE.search(statement):
            self.statements.append(statement)

    def counted(self, call):
        del self.statements[:], self.sent[:]
        result = call()
        return result, list(self.statements)

    def test_begin_costs_at_most_six_statements(self):
        begun, statements = self.counted(lambda: self.conductor.begin(
            self.ctxt, self.src['id'], starting=True, owner='volmig-api:a:g'))
        self.assertTrue(begun['created'])
        self.assertLessEqual(len(statements), 6, '\n'.join(statements))
        # A repeated start that is answered from the record: one.
        self.conductor.started(self.ctxt, begun['migration']['id'], {})
        again, statements = self.counted(lambda: self.conductor.begin(
            self.ctxt, self.src['id'], starting=True))
        self.assertFalse(again['created'])
        self.assertEqual(1, len(statements), '\n'.join(statements))

    def test_started_is_one_update(self):
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)
        started, statements = self.counted(lambda: self.conductor.started(
            self.ctxt, begun['migration']['id'], {'start': 1.5}))
        self.assertEqual(('started', {'start': 1.5}),
                         (started['status'], started['pauses_ms']))
        # The compare-and-swap returns the row: nothing is read before
        # it, nor after it where the database has UPDATE ... RETURNING
        # (MariaDB has not: the row is read after it).
        returning = db.get_engine().dialect.update_returning
        self.assertEqual(1 if returning else 2, len(statements),
                         '\n'.join(statements))
        self.assertTrue(statements[0].lstrip().upper().startswith(
            'UPDATE'), statements[0])

    def test_the_metric_counts_what_the_database_is_sent(self):
        before = metrics.DB_STATEMENTS._value.get()
        self.counted(lambda: self.conductor.begin(
            self.ctxt, self.src['id'], starting=True))
        # The block-storage reads count too: the metric is the process's.
        self.assertGreater(len(self.sent), len(self.statements))
        self.assertEqual(len(self.sent),
                         metrics.DB_STATEMENTS._value.get() - before)

    def test_the_latest_migration_is_read_alone_whatever_the_history(self):
        for _ in range(4):
            begun = self.conductor.begin(self.ctxt, self.src['id'],
                                         starting=True)
            self.conductor.fail(self.ctxt, begun['migration']['id'], 'x',
                                recovery_needed=False)
        latest, statements = self.counted(
            lambda: db.migration_get_latest_by_src_attachment(
                self.ctxt, self.src['id']))
        # Cancel and complete read it: their cost must not grow with the
        # attachment's past migrations (without LIMIT 1, every one of
        # them was read and loaded).
        self.assertEqual(1, len(statements), statements)
        self.assertIn('LIMIT', statements[0].upper())
        self.assertEqual(begun['migration']['id'], latest['id'])

    def test_listing_migrations_builds_no_orm_objects(self):
        """The queue's look at each migration's end (the queued ones), and
        every other list, read rows: what each holds is its record."""
        ended = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True)['migration']
        self.conductor.fail(self.ctxt, ended['id'], 'x',
                            recovery_needed=False)
        running = self.conductor.begin(self.ctxt, self.src['id'],
                                       starting=True)['migration']
        loaded, orm_statements = self.watch_orm()
        everything, statements = self.counted(
            lambda: db.migration_get_all(self.ctxt))
        self.assertEqual(([], []), (loaded, orm_statements))
        self.assertEqual(1, len(statements), statements)
        self.assertEqual([db.migration_get(self.ctxt, migration['id'])
                          for migration in (ended, running)], everything)
        self.assertEqual([], db.migration_get_all(self.ctxt,
                                                  status=states.QUEUED))
        self.assertEqual([running['id']], [
            migration['id'] for migration in db.migration_get_all(
                self.ctxt, status=states.IN_PROGRESS,
                volume_id=running['volume_id'], limit=1)])
        self.assertEqual([running['id']], [
            migration['id'] for migration in db.migration_get_all(
                self.ctxt, limit=5, marker=ended['id'])])

    def watch_orm(self) -> tuple[list, list]:
        """The mapped objects loaded, and the ORM statements sent, from
        now on."""
        loaded: list = []
        orm_statements: list = []

        def on_load(target, context):
            loaded.append(type(target).__name__)

        def on_execute(state):
            if state.is_orm_statement:
                orm_statements.append(str(state.statement))
        sa.event.listen(models.Base, 'load', on_load, propagate=True)
        self.addCleanup(sa.event.remove, models.Base, 'load', on_load)
        sa.event.listen(orm.Session, 'do_orm_execute', on_execute)
        self.addCleanup(sa.event.remove, orm.Session, 'do_orm_execute',
                        on_execute)
        return loaded, orm_statements

    def test_a_start_builds_no_orm_objects_and_reads_what_it_wrote(self):
        loaded, orm_statements = self.watch_orm()
        begun = self.conductor.begin(self.ctxt, self.src['id'],
                                     starting=True, owner='volmig-api:a:g')
        started = self.conductor.started(
            self.ctxt, begun['migration']['id'], {'start': 1.5})
        # Read from the tables: the ORM's compiling, and the mapped objects
        # built only to be turned into dicts, cost more than SQLite's work.
        self.assertEqual(([], []), (loaded, orm_statements))
        # What a start returns is what the record holds, value for value,
        # as the mapped objects would have given it.
        recorded = migrations.present(db.migration_get(
            self.ctxt, started['id']))
        self.assertEqual(recorded, started)
        self.assertEqual(('started', {'start': 1.5}, False),
                         (started['status'], started['pauses_ms'],
                          started['recovery_needed']))
        self.assertEqual(
            dict(recorded, status='starting', pauses_ms=None,
                 updated_at=begun['migration']['updated_at']),
            begun['migration'])

    def test_a_switch_builds_no_orm_objects(self):
        """What a complete's report of the switch sends, the block-storage
        records' statements included (the fake adapter's, volmig-volume's
        own): each write one UPDATE, with no read of the row before it."""
        migration, dst = self.completing()
        loaded, orm_statements = self.watch_orm()
        switched, _ = self.counted(lambda: self.conductor.switched(
            self.ctxt, migration['id'], {'switch': 2.0}))
        self.assertEqual(([], []), (loaded, orm_statements))
        self.assertEqual('src_released', switched['status'])
        # The migration read for the decision; dst's attachment read and
        # marked attached; in one transaction, the migration read again
        # and its compare-and-swap, and the mapping repointed. Where the
        # database has no UPDATE ... RETURNING (MariaDB) the migration is
        # read after its update, and the mapping before its own.
        returning = db.get_engine().dialect.update_returning
        self.assertEqual(
            ['SELECT', 'SELECT', 'UPDATE', 'SELECT', 'UPDATE']
            + ([] if returning else ['SELECT', 'SELECT']) + ['UPDATE'],
            [statement.split()[0] for statement in self.sent],
            '\n'.join(self.sent))
        bdm = instances_db.bdm_get_by_attachment(self.ctxt, dst['id'])
        self.assertEqual((migration['volume_id'], 'attached'), (
            bdm['volume_id'],
            self.volumes.attachment_get(self.ctxt, dst['id'])[
                'attach_status']))
        self.assertEqual(self.volumes.attachment_get(
            self.ctxt, dst['id'])['connection_info'], bdm['connection_info'])

    def test_an_attach_update_reads_once_and_writes_once(self):
        volume = self.volumes.create_volume(self.ctxt, 16)
        attachment = self.volumes.attachment_create(
            self.ctxt, volume['id'], self.instance['uuid'], 'ro')
        loaded, orm_statements = self.watch_orm()
        updated, _ = self.counted(lambda: self.volumes.attachment_update(
            self.ctxt, attachment['id'], {'host': 'h1'}))
        self.assertEqual(([], []), (loaded, orm_statements))
        self.assertEqual(['SELECT', 'UPDATE'],
                         [statement.split()[0] for statement in self.sent])
        # What it returns is what it wrote.
        self.assertEqual(updated, self.volumes.attachment_get(
            self.ctxt, attachment['id']))
        self.assertEqual(({'host': 'h1'}, 'attaching', {
            'driver_volume_type': 'fake',
            'data': {'volume_id': volume['id'], 'access_mode': 'ro'}}), (
            updated['connector'], updated['attach_status'],
            updated['connection_info']))
        self.assertRaises(exception.AttachmentNotFound,
                          self.volumes.attachment_update, self.ctxt,
                          uuidutils.generate_uuid(), {'host': 'h1'})
        self.assertRaises(exception.AttachmentNotFound,
                          self.volumes.attachment_complete, self.ctxt,
                          uuidutils.generate_uuid())

    def test_a_start_on_a_host_with_no_compute_service(self):
        with db.transaction(self.ctxt) as session:
            session.execute(sa.delete(models.Service))
        exc = self.assertRaises(exception.ServiceNotFound,
                                self.conductor.begin, self.ctxt,
                                self.src['id'], starting=True)
        self.assertEqual('No %s service is registered on host h1'
                         % compute_rpcapi.BINARY, str(exc).split('.')[0])

    def test_a_heartbeat_is_one_update_and_a_first_one_inserts(self):
        # A cell's thousand agents beat tens of times a second.
        def beat(host):
            service_db.update(self.ctxt, compute_rpcapi.BINARY, host,
                              'volmig-compute', '1.9', {'driver': 'fake'})
        _, statements = self.counted(lambda: beat('h1'))
        self.assertEqual(['UPDATE'], [s.split()[0] for s in statements],
                         '\n'.join(statements))
        _, statements = self.counted(lambda: beat('h9'))
        self.assertEqual(['UPDATE', 'INSERT'],
                         [s.split()[0] for s in statements])
        self.assertEqual({'h1', 'h9'}, {
            service['host'] for service in service_db.get_all(
                self.ctxt, compute_rpcapi.BINARY)})

    def test_placing_a_server_is_one_query_whatever_the_cell(self):
        """The least loaded host that is up and enabled, by name on a
        tie; a deleted server weighs nothing."""
        def server(host, deleted=False):
            instances_db.instance_create(self.ctxt, {
                'uuid': uuidutils.generate_uuid(), 'name': 'vm',
                'host': host, 'project_id': 'p', 'user_id': 'u',
                'vm_state': states.VM_ACTIVE,
                'power_state': states.POWER_RUNNING,
                'deleted_at': timeutils.utcnow() if deleted else None})

        def place():
            return service_db.least_loaded(
                self.ctxt, compute_rpcapi.BINARY, services.up_since())
        for host in ('h2', 'h3', 'h4', 'h5', 'h6'):
            service_db.update(self.ctxt, compute_rpcapi.BINARY, host,
                              'volmig-compute', '1.9', {})
        # h1 runs the base's server; h2 two; h5 one, and one deleted.
        for host in ('h2', 'h2', 'h5'):
            server(host)
        server('h5', deleted=True)
        service_db.set_disabled(self.ctxt, compute_rpcapi.BINARY, 'h3',
                                True, 'retired')
        with db.transaction(self.ctxt) as session:
            session.execute(sa.update(models.Service).filter_by(
                host='h4').values(last_seen_at=timeutils.utcnow()
                                  - datetime.timedelta(hours=1)))
        chosen, statements = self.counted(place)
        self.assertEqual('h6', chosen['host'])
        self.assertEqual(1, len(statements), '\n'.join(statements))
        server('h6')
        # h1, h5 and h6 run one each now: h1 by its name.
        self.assertEqual('h1', place()['host'])
        for host in ('h1', 'h2', 'h5', 'h6'):
            service_db.set_disabled(self.ctxt, compute_rpcapi.BINARY, host,
                                    True, 'full')
        self.assertIsNone(place())

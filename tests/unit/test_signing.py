"""Signed RPC: what a receiver takes, and what it refuses."""

import math
import os
import stat
import time

import fixtures
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import exception
from volmig import metrics
from volmig import signing
from volmig.conf import CONF
from volmig.db import host_keys
from volmig.db import nonces as db_nonces
from volmig.signing import keys
from volmig.signing import nonces
from volmig.signing import registry
from volmig.signing import seals

COMPUTE_TOPIC = 'volmig-compute'
CONDUCTOR_TOPIC = 'volmig-conductor'
VOLUME_TOPIC = 'volmig-volume'
MESSAGE = {'method': 'migration_job_ended', 'version': '1.3',
           'args': {'migration_id': 'm-1', 'status': 'completed',
                    'pauses': {'pivot': 1.5}}}


def _ctxt() -> dict:
    return {'user_id': None, 'project_id': None, 'roles': ['service'],
            'request_id': 'req-1', 'is_admin': True}


def forge(keyring: keys.Keyring, claim: signing.Sender, topic: str, server,
          message: dict = MESSAGE, **changes) -> dict:
    """A context sealed with ``keyring``'s own secret for any claim, as a
    holder of that key can make one."""
    key = keyring.signing_key()
    secret = keyring.secret(key, *keyring.identity) if keyring.holder else \
        key.secret
    seal = dict({'v': seals.VERSION, 'key': key.id,
                 'service': claim.service, 'host': claim.host,
                 'gen': keyring.holder.generation if keyring.holder else None,
                 'ts': time.time(), 'server': server, 'reply': False,
                 'nonce': os.urandom(16).hex()}, **changes)
    ctxt = _ctxt()
    seal['fields'] = sorted(ctxt)
    seal['mac'] = seals._mac(secret, seals._request_parts(seal, topic, ctxt,
                                                          message))
    ctxt[signing.SIGNATURE] = seal
    return ctxt


class SigningTestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(volmig_fixtures.ConfFixture())
        self.useFixture(volmig_fixtures.DatabaseFixture())
        self.dir = conf.state_path
        self.master = self.controller_keyring()

    def controller_keyring(self):
        return keys.Keyring(CONF.signing.key_file, 'controller-1',
                            registry=registry.Registry(host_keys.load))

    def host_keyring(self, service=signing.COMPUTE, host='compute-1'):
        # Each export its own file: a keyring reads its own again when it
        # changes.
        path = os.path.join(self.dir, '%s-%s-%s.json' % (
            service, host, os.urandom(4).hex()))
        volmig_fixtures.export_key(CONF.signing.key_file, service, host,
                                   path)
        self.master.registry.forget()
        return keys.Keyring(path, 'ignored')

    def refusal(self, checker, ctxt, message=MESSAGE) -> str:
        error = self.assertRaises(exception.MessageRefused, checker.check,
                                  ctxt, message)
        return str(error)

    def checker(self, keyring=None, topic=CONDUCTOR_TOPIC,
                server='controller-1', store=None):
        return seals.Checker(keyring or self.master, topic, server, CONF,
                             nonces.Memory() if store is None else store)

    def sign(self, keyring, topic=CONDUCTOR_TOPIC, server=None,
             message=MESSAGE, reply=False):
        return seals.sign(keyring, topic, server, _ctxt(), message,
                          reply=reply)[0]


class SigningTest(SigningTestCase):

    def test_a_host_signs_as_itself_and_the_conductor_knows_it(self):
        ctxt = self.sign(self.host_keyring())
        self.assertEqual(signing.Sender(signing.COMPUTE, 'compute-1'),
                         self.checker().check(ctxt, MESSAGE).sender)

    def test_a_controller_seals_for_a_host_with_that_hosts_key(self):
        mine = self.checker(self.host_keyring(), COMPUTE_TOPIC, 'compute-1')
        other = self.checker(self.host_keyring(host='compute-2'),
                             COMPUTE_TOPIC, 'compute-2')
        ctxt = self.sign(self.master, COMPUTE_TOPIC, 'compute-1')
        self.assertEqual(signing.CONTROLLER,
                         mine.check(dict(ctxt), MESSAGE).sender.service)
        # Another host can read it as its own neither where it was sent
        # nor in its own queue.
        self.assertIn('forged', self.refusal(other, dict(ctxt)))
        ctxt[signing.SIGNATURE]['server'] = 'compute-2'
        self.assertIn('forged', self.refusal(other, ctxt))

    def test_a_host_cannot_speak_as_a_controller_or_another_host(self):
        own = self.host_keyring()
        self.host_keyring(host='compute-2')
        for claim in (signing.Sender(signing.CONTROLLER, 'compute-1'),
                      signing.Sender(signing.COMPUTE, 'compute-2')):
            ctxt = forge(own, claim, CONDUCTOR_TOPIC, None)
            self.assertRegex(self.refusal(self.checker(), ctxt),
                             'forged|exported again')
        # Its own claim, under its own key, is taken.
        self.checker().check(forge(own, own.identity, CONDUCTOR_TOPIC,
                                   None), MESSAGE)

    def test_a_host_key_signs_for_no_other_host_to_a_host(self):
        """compute-1 to compute-2's queue, claiming a controller: it does
        not hold compute-2's key."""
        own = self.host_keyring()
        compute_2 = self.checker(self.host_keyring(host='compute-2'),
                                 COMPUTE_TOPIC, 'compute-2')
        for claim in (signing.Sender(signing.CONTROLLER, 'x'), own.identity):
            ctxt = forge(own, claim, COMPUTE_TOPIC, 'compute-2')
            self.assertRegex(self.refusal(compute_2, ctxt),
                             'forged|no key of this host')

    def test_every_part_of_the_message_is_bound(self):
        changes = [
            lambda c, m: m['args'].update(status='error'),
            lambda c, m: m['args']['pauses'].update(pivot=0),
            lambda c, m: m.update(method='migration_fail'),
            lambda c, m: m.update(version='1.0'),
            lambda c, m: c.update(is_admin=False),
            lambda c, m: c.update(project_id='other'),
            lambda c, m: c.pop('request_id'),
            lambda c, m: c[signing.SIGNATURE].update(ts=time.time() + 1),
            lambda c, m: c[signing.SIGNATURE].update(nonce='0' * 32),
            lambda c, m: c[signing.SIGNATURE].update(server='other'),
            lambda c, m: c[signing.SIGNATURE].update(reply=True),
        ]
        keyring = self.host_keyring()
        for change in changes:
            message = {'method': MESSAGE['method'],
                       'version': MESSAGE['version'],
                       'args': dict(MESSAGE['args'], pauses={'pivot': 1.5})}
            ctxt = self.sign(keyring, message=message)
            change(ctxt, message)
            self.assertIn('forged', self.refusal(self.checker(), ctxt,
                                                 message))

    def test_only_signed_fields_go_on(self):
        ctxt = self.sign(self.host_keyring())
        ctxt.update(client_timeout=30, sender=['controller', 'x'])
        self.checker().check(ctxt, MESSAGE)
        self.assertEqual(sorted(_ctxt()) + [signing.SIGNATURE], sorted(ctxt))

    def test_signed_for_another_topic_is_refused(self):
        ctxt = self.sign(self.master, 'volmig-conductor-operator')
        self.assertIn('forged', self.refusal(self.checker(), ctxt))

    def test_unsigned_is_refused_unless_the_operator_allows_it(self):
        before = metrics.RPC_REFUSED.labels(sender='unknown',
                                            reason='unsigned')._value.get()
        self.assertIn('unsigned', self.refusal(self.checker(), _ctxt()))
        self.assertEqual(before + 1, metrics.RPC_REFUSED.labels(
            sender='unknown', reason='unsigned')._value.get())
        CONF.set_override('allow_unsigned', True, group='signing')
        sender = self.checker().check(_ctxt(), MESSAGE).sender
        self.assertIsInstance(sender, signing.Unsigned)
        # It speaks for a host that holds no key, never for one that does.
        self.host_keyring()
        ctxt = type('Context', (), {'sender': sender})
        self.assertFalse(signing.speaks_for(ctxt, 'compute-1'))
        self.assertTrue(signing.speaks_for(ctxt, 'compute-9'))
        # Nor for a controller.
        self.assertFalse(signing.speaks_for(ctxt, 'c-1', 'volmig-api'))
        # A seal is still checked.
        ctxt = self.sign(self.host_keyring())
        ctxt['roles'] = ['admin']
        self.assertIn('forged', self.refusal(self.checker(), ctxt))

    def test_a_timestamp_must_be_a_finite_number(self):
        own = self.host_keyring()
        for sent in (math.nan, math.inf, -math.inf, 'soon'):
            ctxt = forge(own, own.identity, CONDUCTOR_TOPIC, None, ts=sent)
            self.assertIn('malformed', self.refusal(self.checker(), ctxt))

    def test_a_stale_message_is_refused(self):
        clock = [time.time()]
        self.useFixture(fixtures.MonkeyPatch('time.time', lambda: clock[0]))
        ctxt = self.sign(self.host_keyring())
        clock[0] += CONF.signing.max_age + 5
        self.assertIn('stale', self.refusal(self.checker(), ctxt))

    def test_keys_are_written_for_their_holder_alone(self):
        keyring = self.host_keyring(signing.VOLUME, 'volume-1')
        for key_file in (CONF.signing.key_file, keyring.path):
            self.assertEqual(0o600, stat.S_IMODE(os.stat(key_file).st_mode))

    def test_a_host_key_file_is_not_a_master(self):
        keyring = self.host_keyring()
        error = self.assertRaises(
            exception.ConfigurationError, keys.export, keyring.path,
            keys.Holder(signing.COMPUTE, 'compute-2', 'g'), keyring.path + '2')
        self.assertIn('not the master key', str(error))

    def test_a_missing_key_file_names_the_command_that_makes_it(self):
        error = self.assertRaises(exception.ConfigurationError,
                                  keys.Keyring,
                                  os.path.join(self.dir, 'none.json'), 'h')
        self.assertIn('volmig-manage key create', str(error))


class KindsTest(SigningTestCase):
    """Each kind of key signs as nothing but its own kind and host."""

    def test_a_service_takes_only_a_key_of_its_own_kind_and_host(self):
        compute = self.host_keyring()
        compute.require(signing.COMPUTE, 'compute-1')
        self.host_keyring(signing.CLIENT, 'cinder-1').require(signing.CLIENT)
        self.master.require(signing.CONTROLLER)
        for keyring, identity, says in (
                (self.master, (signing.COMPUTE, 'compute-1'),
                 'holds the master key'),
                (compute, (signing.COMPUTE, 'compute-2'),
                 'holds the key of volmig-compute on "compute-1"'),
                (compute, (signing.VOLUME, 'compute-1'),
                 'holds the key of volmig-compute'),
                (compute, (signing.CONTROLLER,), 'a controller needs'),
                (compute, (signing.CLIENT,), 'holds the key of volmig-co')):
            error = self.assertRaises(exception.ConfigurationError,
                                      keyring.require, *identity)
            self.assertIn(says, str(error))
            self.assertNotIn('\n', str(error))

    def test_a_key_of_an_earlier_release_is_refused_with_what_to_do(self):
        path = os.path.join(self.dir, 'old.json')
        keys.write(path, None, [])
        with open(path) as old:
            body = old.read().replace(
                '"keys"', '"holder": {"service": "volmig-compute", '
                          '"host": "compute-1"}, "keys"')
        with open(path, 'w') as old:
            old.write(body)
        error = self.assertRaises(exception.ConfigurationError, keys.read,
                                  path)
        self.assertIn('export the key of volmig-compute on "compute-1" '
                      'again', str(error))


class RevocationTest(SigningTestCase):
    """One host's key ends alone, at once; a name exported again gets a
    new key."""

    def test_a_revoked_host_is_refused(self):
        ctxt = self.sign(self.host_keyring())
        host_keys.revoke(signing.COMPUTE, 'compute-1')
        self.master.registry.forget()
        self.assertIn('no key of this host is known',
                      self.refusal(self.checker(), ctxt))
        # Nor can a controller seal anything for it any more.
        self.assertRaises(exception.ConfigurationError, self.sign,
                          self.master, COMPUTE_TOPIC, 'compute-1')
        # Another host is unaffected, with no new master key.
        self.checker().check(self.sign(self.host_keyring(host='compute-2')),
                             MESSAGE)

    def test_an_old_name_exported_again_gets_a_new_key(self):
        old = self.host_keyring()
        new = self.host_keyring()
        self.assertNotEqual(old.signing_key().secret,
                            new.signing_key().secret)
        self.assertIn('exported again or revoked',
                      self.refusal(self.checker(), self.sign(old)))
        self.checker().check(self.sign(new), MESSAGE)

    def test_the_same_generation_after_a_rotation(self):
        old = self.host_keyring()
        generation = host_keys.register(signing.COMPUTE, 'compute-1',
                                        keep=True)
        self.assertEqual(old.holder.generation, generation)

    def test_a_revocation_is_read_within_a_refresh(self):
        clock = [1000.0]
        self.useFixture(fixtures.MonkeyPatch('time.monotonic',
                                             lambda: clock[0]))
        known = registry.Registry(host_keys.load)
        host_keys.register(signing.COMPUTE, 'compute-1')
        self.assertIsNotNone(known.generation(signing.COMPUTE, 'compute-1'))
        host_keys.revoke(signing.COMPUTE, 'compute-1')
        clock[0] += registry.REFRESH
        self.assertIsNone(known.generation(signing.COMPUTE, 'compute-1'))


class VolumeTopicTest(SigningTestCase):
    """Any volume node may take a message to volmig-volume's topic: it
    carries a seal for each, so none can forge one for another."""

    def test_each_node_checks_its_own_seal(self):
        nodes = {host: self.host_keyring(signing.VOLUME, host)
                 for host in ('volume-1', 'volume-2')}
        ctxt = self.sign(self.master, VOLUME_TOPIC)
        self.assertEqual(['volume-1', 'volume-2'],
                         sorted(ctxt[signing.SIGNATURE]['macs']))
        for host, keyring in nodes.items():
            self.assertEqual(signing.CONTROLLER, self.checker(
                keyring, VOLUME_TOPIC, host).check(
                    dict(ctxt), MESSAGE).sender.service)

    def test_a_node_cannot_speak_as_the_controllers_to_another(self):
        one = self.host_keyring(signing.VOLUME, 'volume-1')
        two = self.checker(self.host_keyring(signing.VOLUME, 'volume-2'),
                           VOLUME_TOPIC, 'volume-2')
        ctxt = forge(one, signing.Sender(signing.CONTROLLER, 'c'),
                     VOLUME_TOPIC, None)
        seal = ctxt[signing.SIGNATURE]
        seal['macs'] = {'volume-2': seal.pop('mac')}
        self.assertIn('forged', self.refusal(two, ctxt))


class RepliesTest(SigningTestCase):
    """A call's answer is taken only sealed by the server called."""

    def received(self, server_keyring, topic, server, reply=True):
        sealed, sent = seals.sign(self.master, topic, server, _ctxt(),
                                  MESSAGE, reply=reply)
        checked = self.checker(server_keyring, topic, server).check(
            sealed, MESSAGE)
        return sent, checked

    def test_the_server_called_seals_its_answer(self):
        sent, received = self.received(self.host_keyring(), COMPUTE_TOPIC,
                                       'compute-1')
        for body in ({'result': {'status': 'done'}}, {'failure': '{}'}):
            self.assertEqual(body, seals.open_reply(
                self.master, sent, 'm', received.reply(body)))

    def test_a_cast_asks_for_no_reply(self):
        _, received = self.received(self.host_keyring(), COMPUTE_TOPIC,
                                    'compute-1', reply=False)
        self.assertIsNone(received.reply)

    def test_another_host_cannot_answer_for_it(self):
        self.host_keyring(host='compute-2')
        _, sent = seals.sign(self.master, COMPUTE_TOPIC, 'compute-2',
                             _ctxt(), MESSAGE, reply=True)
        # compute-1's own seal, over compute-2's answer.
        _, forger = self.received(self.host_keyring(), COMPUTE_TOPIC,
                                  'compute-1')
        forged = forger.reply({'result': 'done'})
        forged[signing.REPLY]['seal']['host'] = 'compute-2'
        for reply in (forged, {'result': 'done'}, 'done', None):
            error = self.assertRaises(exception.ReplyRefused,
                                      seals.open_reply, self.master, sent,
                                      'volume_copy_status', reply)
            self.assertIn('reply', str(error))

    def test_an_answer_is_bound_to_its_request(self):
        keyring = self.host_keyring()
        first, _ = self.received(keyring, COMPUTE_TOPIC, 'compute-1')
        _, second = self.received(keyring, COMPUTE_TOPIC, 'compute-1')
        self.assertRaises(exception.ReplyRefused, seals.open_reply,
                          self.master, first, 'm',
                          second.reply({'result': 'done'}))

    def test_a_host_takes_only_a_controllers_answer(self):
        keyring = self.host_keyring()
        sealed, sent = seals.sign(keyring, CONDUCTOR_TOPIC, None, _ctxt(),
                                  MESSAGE, reply=True)
        received = self.checker().check(sealed, MESSAGE)
        answer = received.reply({'result': 1})
        self.assertEqual({'result': 1},
                         seals.open_reply(keyring, sent, 'm', answer))
        # Its own seal over an answer is not a controller's.
        answer[signing.REPLY]['seal']['service'] = signing.COMPUTE
        self.assertRaises(exception.ReplyRefused, seals.open_reply, keyring,
                          sent, 'm', answer)


class ReplayTest(SigningTestCase):
    """A message is taken once: by one server of its topic, in one of
    its processes, ever while it is fresh."""

    def test_a_replay_is_refused(self):
        checker = self.checker()
        ctxt = self.sign(self.host_keyring())
        checker.check(dict(ctxt), MESSAGE)
        self.assertIn('replayed', self.refusal(checker, dict(ctxt)))

    def test_across_a_restart_and_the_servers_of_a_topic(self):
        ctxt = self.sign(self.host_keyring())
        self.checker(store=db_nonces.DatabaseNonces()).check(dict(ctxt),
                                                             MESSAGE)
        # Another conductor, or this one started again: a new process's
        # store, on the same database.
        other = self.checker(server='controller-2',
                             store=db_nonces.DatabaseNonces())
        self.assertIn('replayed', self.refusal(other, dict(ctxt)))

    def test_a_compute_agent_remembers_across_its_restart(self):
        path = os.path.join(self.dir, 'nonces')
        keyring = self.host_keyring()
        ctxt = self.sign(self.master, COMPUTE_TOPIC, 'compute-1')
        self.checker(keyring, COMPUTE_TOPIC, 'compute-1',
                     nonces.Journal(path)).check(dict(ctxt), MESSAGE)
        again = self.checker(keyring, COMPUTE_TOPIC, 'compute-1',
                             nonces.Journal(path))
        self.assertIn('replayed', self.refusal(again, dict(ctxt)))
        # A new message is taken.
        again.check(self.sign(self.master, COMPUTE_TOPIC, 'compute-1'),
                    MESSAGE)

    def test_after_a_reboot_what_was_sent_before_is_refused(self):
        path = os.path.join(self.dir, 'nonces')
        keyring = self.host_keyring()
        ctxt = self.sign(self.master, COMPUTE_TOPIC, 'compute-1')
        nonces.Journal(path).remember('0' * 32, time.time() + 60)
        self.useFixture(fixtures.MonkeyPatch(
            'volmig.signing.nonces._boot_id', lambda: 'another boot'))
        checker = self.checker(keyring, COMPUTE_TOPIC, 'compute-1',
                               nonces.Journal(path))
        self.assertIn('replayed', self.refusal(checker, ctxt))

    def test_nonces_are_forgotten_once_their_messages_are_stale(self):
        clock = [time.time()]
        self.useFixture(fixtures.MonkeyPatch('time.time', lambda: clock[0]))
        path = os.path.join(self.dir, 'nonces')
        journal = nonces.Journal(path)
        for number in range(3):
            self.assertTrue(journal.remember('%032x' % number, clock[0] + 10))
        self.assertFalse(journal.remember('%032x' % 1, clock[0] + 10))
        clock[0] += 100
        self.assertTrue(journal.remember('%032x' % 9, clock[0] + 10))
        self.assertEqual(1, len(journal))
        # And on the disk, once the file holds mostly the stale.
        journal._lines += 5000
        clock[0] += 100
        journal.remember('%032x' % 10, clock[0] + 10)
        with open(path) as lines:
            self.assertEqual(2, len(lines.read().splitlines()))

    def _statements_through(self, store, hook):
        """``store``'s connections, each statement run by ``hook(cursor,
        statement, parameters)``: a database that fails in its way."""
        connect = store._connect

        class Cursor:
            def __init__(self, cursor):
                self._cursor = cursor

            def __getattr__(self, name):
                return getattr(self._cursor, name)

            def execute(self, statement, parameters=()):
                return hook(self._cursor, statement, parameters)

        class Connection:
            def __init__(self, connection):
                self._connection = connection

            def __getattr__(self, name):
                return getattr(self._connection, name)

            def cursor(self):
                return Cursor(self._connection.cursor())

        self.useFixture(fixtures.MockPatchObject(
            store, '_connect', lambda: Connection(connect())))

    def test_an_insert_whose_answer_was_lost_is_no_replay(self):
        store = db_nonces.DatabaseNonces()
        lost = []

        def loses_the_first_answer(cursor, statement, parameters):
            # Committed (in autocommit), and then the answer is lost, as
            # when a Galera node is killed under it.
            cursor.execute(statement, parameters)
            if not lost and statement.startswith('INSERT'):
                lost.append(True)
                raise store._dbapi.OperationalError('connection lost')

        self._statements_through(store, loses_the_first_answer)
        nonce = '%032x' % 7
        self.assertTrue(store.remember(nonce, time.time() + 10))
        self.assertEqual([True], lost)
        # A real replay is refused still, in this process and another.
        self.assertFalse(store.remember(nonce, time.time() + 10))
        self.assertFalse(db_nonces.DatabaseNonces().remember(
            nonce, time.time() + 10))

    def test_conflicts_in_a_row_are_tried_again(self):
        # A Galera node killed under a migration: its peers gave up the
        # purge's DELETE, then the insert, as conflicts.
        store = db_nonces.DatabaseNonces()
        conflicts = [3]

        def conflicting(cursor, statement, parameters):
            if conflicts[0]:
                conflicts[0] -= 1
                raise store._dbapi.OperationalError(
                    1213, 'Deadlock found when trying to get lock')
            cursor.execute(statement, parameters)

        self._statements_through(store, conflicting)
        self.useFixture(fixtures.MockPatchObject(time, 'sleep'))
        store._purged = 0.0
        self.assertTrue(store.remember('%032x' % 9, time.time() + 10))
        self.assertEqual(0, conflicts[0])
        self.assertFalse(db_nonces.DatabaseNonces().remember(
            '%032x' % 9, time.time() + 10))

    def test_the_database_forgets_stale_nonces(self):
        clock = [time.time()]
        self.useFixture(fixtures.MonkeyPatch('time.time', lambda: clock[0]))
        store = db_nonces.DatabaseNonces()
        self.assertTrue(store.remember('%032x' % 1, clock[0] + 10))
        clock[0] += db_nonces.PURGE_INTERVAL + 20
        self.assertTrue(store.remember('%032x' % 2, clock[0] + 10))
        # The stale one's nonce is gone: only its staleness refuses it.
        self.assertTrue(store.remember('%032x' % 1, clock[0] + 10))


class RotationTest(SigningTestCase):
    """Old and new master keys are both taken during the window."""

    def setUp(self):
        super().setUp()
        self.now = time.time()
        self.useFixture(fixtures.MonkeyPatch('time.time', lambda: self.now))
        self.path = CONF.signing.key_file
        _, [old] = keys.read(self.path)
        self.old = old._replace(signs_from=self.now - 10)
        self.new = keys.new_key(2, self.now + 100)
        keys.write(self.path, None,
                   [self.old._replace(expires=self.now + 200), self.new])
        self.master = self.controller_keyring()
        self.compute = self.host_keyring()

    def sent_with(self, key_id: int) -> dict:
        """What compute-1 sends with key ``key_id``, expired or not."""
        keyring = keys.Keyring(self.compute.path, 'x')
        [key] = [key for key in keys.read(self.compute.path)[1]
                 if key.id == key_id]
        keyring.signing_key = lambda: key
        return self.sign(keyring)

    def test_the_new_key_signs_after_the_window_and_the_old_expires(self):
        self.assertEqual(1, self.master.signing_key().id)
        # Both are accepted within the window, whichever a host has.
        for key_id in (1, 2):
            self.checker().check(self.sent_with(key_id), MESSAGE)
        self.now += 150
        self.master._checked = 0
        self.assertEqual(2, self.master.signing_key().id)
        self.now += 100
        self.master._checked = 0
        self.checker().check(self.sent_with(2), MESSAGE)
        self.assertIn('unknown key 1', self.refusal(self.checker(),
                                                     self.sent_with(1)))

    def test_a_changed_file_is_read_again(self):
        keys.write(self.path, None, [self.new._replace(signs_from=0)])
        self.master._checked = 0
        self.assertEqual([2], [key.id for key in self.master._fresh()])

"""Signed RPC: what a receiver takes, and what it refuses."""

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

COMPUTE_TOPIC = 'volmig-compute'
CONDUCTOR_TOPIC = 'volmig-conductor'
MESSAGE = {'method': 'migration_job_ended', 'version': '1.3',
           'args': {'migration_id': 'm-1', 'status': 'completed',
                    'pauses': {'pivot': 1.5}}}


def forge(key: signing.Key, claim: signing.Sender, topic: str, server,
          message: dict) -> dict:
    """A context signed with ``key`` for any claim, as a holder of that
    key can make one."""
    seal = {'v': 1, 'key': key.id, 'service': claim.service,
            'host': claim.host, 'ts': time.time(), 'server': server,
            'nonce': os.urandom(16).hex()}
    ctxt = _ctxt()
    seal['fields'] = sorted(ctxt)
    seal['mac'] = signing._mac(key.secret, seal, topic, ctxt, message)
    ctxt[signing.SIGNATURE] = seal
    return ctxt


def _ctxt() -> dict:
    return {'user_id': None, 'project_id': None, 'roles': ['service'],
            'request_id': 'req-1', 'is_admin': True}


class SigningTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(volmig_fixtures.ConfFixture())
        self.dir = conf.state_path
        self.master = signing.Keyring(CONF.signing.key_file, 'controller-1')

    def host_keyring(self, service=signing.COMPUTE, host='compute-1'):
        path = os.path.join(self.dir, '%s-%s.json' % (service, host))
        signing.export(CONF.signing.key_file, service, host, path)
        return signing.Keyring(path, 'ignored')

    def refusal(self, checker, ctxt, message=MESSAGE) -> str:
        error = self.assertRaises(exception.MessageRefused, checker.check,
                                  ctxt, message)
        return str(error)

    def conductor(self):
        return signing.Checker(self.master, CONDUCTOR_TOPIC, 'controller-1',
                               CONF)

    def test_a_host_signs_as_itself_and_the_conductor_knows_it(self):
        ctxt = signing.sign(self.host_keyring(), CONDUCTOR_TOPIC, None,
                            _ctxt(), MESSAGE)
        self.assertEqual(signing.Sender(signing.COMPUTE, 'compute-1'),
                         self.conductor().check(ctxt, MESSAGE))

    def test_a_controller_signs_for_a_host_with_that_hosts_key(self):
        ctxt = signing.sign(self.master, COMPUTE_TOPIC, 'compute-1', _ctxt(),
                            MESSAGE)
        mine = signing.Checker(self.host_keyring(), COMPUTE_TOPIC,
                               'compute-1', CONF)
        self.assertEqual(signing.CONTROLLER, mine.check(ctxt,
                                                        MESSAGE).service)
        # Another host cannot read it as its own.
        other = signing.Checker(self.host_keyring(host='compute-2'),
                                COMPUTE_TOPIC, 'compute-2', CONF)
        self.assertIn('forged', self.refusal(other, ctxt))

    def test_a_host_cannot_speak_as_a_controller_or_another_host(self):
        _, [own] = signing.read(self.host_keyring().path)
        for claim in (signing.Sender(signing.CONTROLLER, 'compute-1'),
                      signing.Sender(signing.COMPUTE, 'compute-2')):
            # What compute-1 can make: any claim, under its own key.
            ctxt = forge(own, claim, CONDUCTOR_TOPIC, None, MESSAGE)
            self.assertIn('forged', self.refusal(self.conductor(), ctxt))
        # Its own claim, under its own key, is taken.
        ctxt = forge(own, signing.Sender(signing.COMPUTE, 'compute-1'),
                     CONDUCTOR_TOPIC, None, MESSAGE)
        self.conductor().check(ctxt, MESSAGE)

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
        ]
        for change in changes:
            message = {'method': MESSAGE['method'],
                       'version': MESSAGE['version'],
                       'args': dict(MESSAGE['args'], pauses={'pivot': 1.5})}
            ctxt = signing.sign(self.host_keyring(), CONDUCTOR_TOPIC, None,
                                _ctxt(), message)
            change(ctxt, message)
            self.assertIn('forged', self.refusal(self.conductor(), ctxt,
                                                 message))

    def test_only_signed_fields_go_on(self):
        ctxt = signing.sign(self.host_keyring(), CONDUCTOR_TOPIC, None,
                            _ctxt(), MESSAGE)
        ctxt.update(client_timeout=30, sender=['controller', 'x'])
        self.conductor().check(ctxt, MESSAGE)
        self.assertEqual(sorted(_ctxt()) + [signing.SIGNATURE], sorted(ctxt))

    def test_signed_for_another_topic_is_refused(self):
        ctxt = signing.sign(self.master, 'volmig-conductor-operator', None,
                            _ctxt(), MESSAGE)
        self.assertIn('forged', self.refusal(self.conductor(), ctxt))

    def test_unsigned_is_refused_unless_the_operator_allows_it(self):
        before = metrics.RPC_REFUSED.labels(sender='unknown',
                                            reason='unsigned')._value.get()
        self.assertIn('unsigned', self.refusal(self.conductor(), _ctxt()))
        self.assertEqual(before + 1, metrics.RPC_REFUSED.labels(
            sender='unknown', reason='unsigned')._value.get())
        CONF.set_override('allow_unsigned', True, group='signing')
        self.assertIsNone(self.conductor().check(_ctxt(), MESSAGE))
        # A signature is still checked.
        ctxt = signing.sign(self.host_keyring(), CONDUCTOR_TOPIC, None,
                            _ctxt(), MESSAGE)
        ctxt['roles'] = ['admin']
        self.assertIn('forged', self.refusal(self.conductor(), ctxt))

    def test_a_replay_is_refused(self):
        checker = self.conductor()
        ctxt = signing.sign(self.host_keyring(), CONDUCTOR_TOPIC, None,
                            _ctxt(), MESSAGE)
        checker.check(dict(ctxt), MESSAGE)
        self.assertIn('replayed', self.refusal(checker, dict(ctxt)))

    def test_nonces_are_forgotten_once_their_messages_are_stale(self):
        clock = [1000.0]
        self.useFixture(fixtures.MonkeyPatch('time.monotonic',
                                             lambda: clock[0]))
        checker = self.conductor()
        keyring = self.host_keyring()
        for _ in range(3):
            checker.check(signing.sign(keyring, CONDUCTOR_TOPIC, None,
                                       _ctxt(), MESSAGE), MESSAGE)
        self.assertEqual(3, len(checker._nonces))
        clock[0] += 2 * CONF.signing.max_age
        checker.check(signing.sign(keyring, CONDUCTOR_TOPIC, None, _ctxt(),
                                   MESSAGE), MESSAGE)
        self.assertEqual(1, len(checker._nonces))

    def test_a_stale_message_is_refused(self):
        clock = [time.time()]
        self.useFixture(fixtures.MonkeyPatch('time.time', lambda: clock[0]))
        ctxt = signing.sign(self.host_keyring(), CONDUCTOR_TOPIC, None,
                            _ctxt(), MESSAGE)
        clock[0] += CONF.signing.max_age + 5
        self.assertIn('stale', self.refusal(self.conductor(), ctxt))

    def test_keys_are_written_for_their_owner_alone(self):
        path = os.path.join(self.dir, 'exported.json')
        signing.export(CONF.signing.key_file, signing.VOLUME, '', path)
        for key_file in (CONF.signing.key_file, path):
            self.assertEqual(0o600, stat.S_IMODE(os.stat(key_file).st_mode))

    def test_a_host_key_file_is_not_a_master(self):
        path = os.path.join(self.dir, 'compute.json')
        signing.export(CONF.signing.key_file, signing.COMPUTE, 'compute-1',
                       path)
        error = self.assertRaises(exception.ConfigurationError,
                                  signing.export, path, signing.COMPUTE,
                                  'compute-2', path + '.2')
        self.assertIn('not the master key', str(error))

    def test_a_missing_key_file_names_the_command_that_makes_it(self):
        error = self.assertRaises(exception.ConfigurationError,
                                  signing.Keyring,
                                  os.path.join(self.dir, 'none.json'), 'h')
        self.assertIn('volmig-manage key create', str(error))


class RotationTest(base.BaseTestCase):
    """Old and new keys are both taken during the window."""

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture())
        self.now = time.time()
        self.useFixture(fixtures.MonkeyPatch('time.time', lambda: self.now))
        self.path = CONF.signing.key_file
        _, [old] = signing.read(self.path)
        self.old = old._replace(signs_from=self.now - 10)
        self.new = signing.new_key(2, self.now + 100)
        signing.write(self.path, None,
                      [self.old._replace(expires=self.now + 200), self.new])
        self.master = signing.Keyring(self.path, 'controller-1')
        self.compute = os.path.join(os.path.dirname(self.path), 'c.json')
        signing.export(self.path, signing.COMPUTE, 'compute-1', self.compute)
        self.checker = signing.Checker(self.master, 'volmig-conductor',
                                       'controller-1', CONF)

    def sent_with(self, key_id: int) -> dict:
        _, keys = signing.read(self.compute)
        [key] = [key for key in keys if key.id == key_id]
        return forge(key, signing.Sender(signing.COMPUTE, 'compute-1'),
                     'volmig-conductor', None, MESSAGE)

    def test_the_new_key_signs_after_the_window_and_the_old_expires(self):
        self.assertEqual(1, self.master.signing_key().id)
        # Both are accepted within the window, whichever a host has.
        for key_id in (1, 2):
            self.checker.check(self.sent_with(key_id), MESSAGE)
        self.now += 150
        self.master._checked = 0
        self.assertEqual(2, self.master.signing_key().id)
        self.now += 100
        self.master._checked = 0
        self.checker.check(self.sent_with(2), MESSAGE)
        self.assertIn('unknown key 1', str(self.assertRaises(
            exception.MessageRefused, self.checker.check, self.sent_with(1),
            MESSAGE)))

    def test_a_changed_file_is_read_again(self):
        signing.write(self.path, None, [self.new._replace(signs_from=0)])
        self.master._checked = 0
        self.assertEqual([2], [key.id for key in self.master._fresh()])

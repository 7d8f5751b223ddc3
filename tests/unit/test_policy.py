"""The policy defaults in code, persona by persona."""

from oslotest import base

from tests import fixtures
from volmig import context
from volmig import exception
from volmig import policy


def _ctxt(roles, project='project-a'):
    return context.RequestContext(user_id='u', project_id=project,
                                  roles=roles)


class PolicyDefaultsTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.ConfFixture())
        self.useFixture(fixtures.PolicyFixture())

    def assertAllowed(self, ctxt, rule, target=None):
        policy.authorize(ctxt, rule, target)

    def assertRefused(self, ctxt, rule, target=None):
        exc = self.assertRaises(exception.Forbidden, policy.authorize, ctxt,
                                rule, target)
        self.assertIn(rule, str(exc))
        self.assertEqual(403, exc.code)

    def test_swap_is_for_admin_and_service(self):
        rule = 'volmig:os-volume_attachments:swap'
        self.assertRefused(_ctxt(['member', 'reader']), rule, {})
        self.assertAllowed(_ctxt(['admin']), rule, {})
        self.assertAllowed(_ctxt(['service']), rule, {})

    def test_project_scoping(self):
        own = {'project_id': 'project-a'}
        other = {'project_id': 'project-b'}
        member = _ctxt(['member', 'reader'])
        for action in ('show', 'delete', 'stop', 'start'):
            self.assertAllowed(member, 'volmig:servers:%s' % action, own)
            self.assertRefused(member, 'volmig:servers:%s' % action, other)
        self.assertAllowed(_ctxt(['admin']), 'volmig:servers:delete', other)

    def test_reader_reads_but_does_not_write(self):
        reader = _ctxt(['reader'])
        own = {'project_id': 'project-a'}
        self.assertAllowed(reader, 'volmig:servers:show', own)
        self.assertAllowed(reader, 'volmig:os-volume_attachments:index', own)
        self.assertRefused(reader, 'volmig:servers:create', own)
        self.assertRefused(reader, 'volmig:os-volume_attachments:create',
                           own)

    def test_migrations_and_forced_hosts_are_for_operators(self):
        member = _ctxt(['member', 'reader'])
        for rule in ('volmig:os-volumes:migrate',
                     'volmig:servers:create:forced_host',
                     'volmig:servers:show:host',
                     'volmig:volume_migration:show'):
            self.assertRefused(member, rule)
            self.assertAllowed(_ctxt(['admin']), rule)

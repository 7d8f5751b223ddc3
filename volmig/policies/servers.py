from oslo_policy import policy

from volmig.policies import base

PREFIX = 'volmig:servers:%s'
PATH = '/v2.1/servers'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'index', check_str=base.ADMIN_OR_PROJECT_READER,
        description="List the project's servers.",
        operations=[{'method': 'GET', 'path': PATH},
                    {'method': 'GET', 'path': PATH + '/detail'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show', check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show a server.',
        operations=[{'method': 'GET', 'path': PATH + '/{server_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show:host', check_str=base.ADMIN,
        description='See which compute host a server runs on.',
        operations=[{'method': 'GET', 'path': PATH + '/{server_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Create one or more servers.',
        operations=[{'method': 'POST', 'path': PATH}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create:forced_host', check_str=base.ADMIN,
        description='Pin new servers to a host with availability_zone '
                    '"AZ:HOST".',
        operations=[{'method': 'POST', 'path': PATH}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'delete', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Delete a server.',
        operations=[{'method': 'DELETE', 'path': PATH + '/{server_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'stop', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Shut a server off (os-stop).',
        operations=[{'method': 'POST',
                     'path': PATH + '/{server_id}/action (os-stop)'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'start', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Power a server on (os-start).',
        operations=[{'method': 'POST',
                     'path': PATH + '/{server_id}/action (os-start)'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'getConsoleOutput',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description="Read a server's serial console (os-getConsoleOutput).",
        operations=[{'method': 'POST', 'path': PATH + '/{server_id}/action '
                     '(os-getConsoleOutput)'}]),
]


def list_rules():
    return rules

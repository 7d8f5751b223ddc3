from oslo_policy import policy

from volmig.policies import base

PREFIX = 'volmig:os-volume_attachments:%s'
PATH = '/v2.1/servers/{server_id}/os-volume_attachments'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'index', check_str=base.ADMIN_OR_PROJECT_READER,
        description="List a server's volume attachments.",
        operations=[{'method': 'GET', 'path': PATH}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show', check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show one volume attachment of a server.',
        operations=[{'method': 'GET', 'path': PATH + '/{volume_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Attach a volume to a server, read/write or read-only.',
        operations=[{'method': 'POST', 'path': PATH}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'delete', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Detach a volume from a server.',
        operations=[{'method': 'DELETE', 'path': PATH + '/{volume_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'swap', check_str=base.ADMIN_OR_SERVICE,
        description='Legacy swap: copy an attached volume into another '
                    'volume and switch the server to it. Kept for Nova '
                    'compatibility; block-storage services should use '
                    'volume migrations instead.',
        operations=[{'method': 'PUT', 'path': PATH + '/{volume_id}'}]),
]


def list_rules():
    return rules

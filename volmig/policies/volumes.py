from oslo_policy import policy

from volmig.policies import base

PREFIX = 'volmig:os-volumes:%s'
PATH = '/v2.1/os-volumes'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'index', check_str=base.ADMIN_OR_PROJECT_READER,
        description='List volumes, through the block-storage adapter.',
        operations=[{'method': 'GET', 'path': PATH}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show', check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show a volume and its attachments.',
        operations=[{'method': 'GET', 'path': PATH + '/{volume_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Create a volume.',
        operations=[{'method': 'POST', 'path': PATH}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'delete', check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Delete a volume that has no attachments.',
        operations=[{'method': 'DELETE', 'path': PATH + '/{volume_id}'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'migrate', check_str=base.ADMIN,
        description='Ask the block-storage service to move a volume to '
                    'another pool (os-migrate_volume).',
        operations=[{'method': 'POST',
                     'path': PATH + '/{volume_id}/action '
                             '(os-migrate_volume)'}]),
]


def list_rules():
    return rules

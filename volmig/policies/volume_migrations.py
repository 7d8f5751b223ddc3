from oslo_policy import policy

from volmig.policies import base

PREFIX = 'volmig:volume_migration:%s'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'start', check_str=base.ADMIN_OR_SERVICE,
        description='Start moving an attached volume: stop all writes to '
                    'the source attachment.',
        operations=[{'method': 'RPC', 'path': 'volmig-api:migration_start'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'cancel', check_str=base.ADMIN_OR_SERVICE,
        description='Send the guest back to the source.',
        operations=[{'method': 'RPC',
                     'path': 'volmig-api:migration_cancel'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'complete', check_str=base.ADMIN_OR_SERVICE,
        description='Switch the guest to the destination.',
        operations=[{'method': 'RPC',
                     'path': 'volmig-api:migration_complete'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show', check_str=base.ADMIN_OR_SERVICE,
        description='Show and list volume migrations.',
        operations=[{'method': 'RPC', 'path': 'volmig-api:migration_get'},
                    {'method': 'RPC', 'path': 'volmig-api:migration_list'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'abort', check_str=base.ADMIN,
        description='Send a stuck migration\'s guest back to src, while '
                    'src is still whole.',
        operations=[{'method': 'POST',
                     'path': '/os-volume-migrations/{id}/action (abort)'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'force_complete', check_str=base.ADMIN,
        description='Have the agent finish a migration past its switch, '
                    'or one that needs recovery.',
        operations=[{'method': 'POST', 'path':
                     '/os-volume-migrations/{id}/action (force_complete)'}]),
]


def list_rules():
    return rules

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
]


def list_rules():
    return rules

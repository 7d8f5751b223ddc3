from oslo_policy import policy

from volmig.policies import base

PREFIX = 'volmig:os-volume-pools:%s'
PATH = '/v2.1/os-volume-pools/{pool}'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show', check_str=base.ADMIN,
        description='Show the latest drain of a pool and its progress, '
                    'and list its drains.',
        operations=[{'method': 'GET', 'path': PATH},
                    {'method': 'GET', 'path': PATH + '/drains'}]),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'drain', check_str=base.ADMIN,
        description='Move every volume out of a pool (drain), plan it '
                    '(dry_run), or cancel a running drain (cancel_drain).',
        operations=[{'method': 'POST', 'path': PATH + '/action (drain)'},
                    {'method': 'POST',
                     'path': PATH + '/action (cancel_drain)'}]),
]


def list_rules():
    return rules

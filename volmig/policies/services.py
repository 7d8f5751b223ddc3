from oslo_policy import policy

from volmig.policies import base

LIST = 'volmig:os-services:list'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST, check_str=base.ADMIN,
        description='List the services of every host, with their state '
                    '(up or down, from their heartbeats) and status.',
        operations=[{'method': 'GET', 'path': '/os-services'}]),
]


def list_rules():
    return rules

from oslo_policy import policy

from volmig.policies import base

GET = 'volmig:metrics'

rules = [
    policy.DocumentedRuleDefault(
        name=GET, check_str=base.ADMIN,
        description="Scrape the cloud's metrics on the API's port, when "
                    '[metrics] api_access is "token".',
        operations=[{'method': 'GET', 'path': '/metrics'}]),
]


def list_rules():
    return rules

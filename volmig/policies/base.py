from oslo_policy import policy

ADMIN = 'role:admin'
SERVICE = 'role:service'
ADMIN_OR_SERVICE = 'rule:admin_api or rule:service_api'

rules = [
    policy.RuleDefault('admin_api', ADMIN,
                       description='An administrator of the cloud.'),
    policy.RuleDefault('service_api', SERVICE,
                       description='Another OpenStack service, such as the '
                                   'block-storage service.'),
]


def list_rules():
    return rules

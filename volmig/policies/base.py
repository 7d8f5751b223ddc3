from oslo_policy import policy

ADMIN = 'role:admin'
SERVICE = 'role:service'
ADMIN_OR_SERVICE = 'rule:admin_api or rule:service_api'
PROJECT_READER = 'role:reader and project_id:%(project_id)s'
PROJECT_MEMBER = 'role:member and project_id:%(project_id)s'
ADMIN_OR_PROJECT_READER = 'rule:admin_api or (%s)' % PROJECT_READER
ADMIN_OR_PROJECT_MEMBER = 'rule:admin_api or (%s)' % PROJECT_MEMBER

rules = [
    policy.RuleDefault('admin_api', ADMIN,
                       description='An administrator of the cloud.'),
    policy.RuleDefault('service_api', SERVICE,
                       description='Another OpenStack service, such as the '
                                   'block-storage service.'),
]


def list_rules():
    return rules

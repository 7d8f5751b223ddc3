"""The policy enforcer; the rules themselves live in ``volmig.policies``."""

from oslo_policy import policy

from volmig import exception
from volmig import policies
from volmig.conf import CONF

_ENFORCER = None


def get_enforcer(conf=CONF) -> policy.Enforcer:
    """Also the oslo.policy.enforcer entry point for the policy tools."""
    global _ENFORCER
    if _ENFORCER is None:
        _ENFORCER = policy.Enforcer(conf)
        _ENFORCER.register_defaults(policies.list_rules())
    return _ENFORCER


def reset() -> None:
    global _ENFORCER
    _ENFORCER = None


def authorize(ctxt, action: str) -> None:
    get_enforcer().authorize(action, {}, ctxt.to_policy_values(),
                             do_raise=True,
                             exc=exception.Forbidden, action=action)

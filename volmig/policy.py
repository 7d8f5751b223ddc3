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


def authorize(ctxt, action: str, target: dict | None = None) -> None:
    """Raise Forbidden unless ``ctxt`` may do ``action`` on ``target``.

    The target defaults to the caller's own project.
    """
    if target is None:
        target = {'project_id': ctxt.project_id}
    get_enforcer().authorize(action, target, ctxt.to_policy_values(),
                             do_raise=True,
                             exc=exception.Forbidden, action=action)


def check(ctxt, action: str, target: dict | None = None) -> bool:
    """Whether ``ctxt`` may do ``action``, for optional extras in a view."""
    if target is None:
        target = {'project_id': ctxt.project_id}
    return get_enforcer().enforce(action, target, ctxt.to_policy_values())

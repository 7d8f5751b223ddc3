"""The policy enforcer; the rules themselves live in ``volmig.policies``."""

import threading

from oslo_policy import policy

from volmig import exception
from volmig import policies
from volmig.conf import CONF

_ENFORCER = None
_LOCK = threading.Lock()


def get_enforcer(conf=CONF) -> policy.Enforcer:
    """Also the oslo.policy.enforcer entry point for the policy tools.

    Published only once its rules are registered: a second request
    thread must never see an enforcer without them.
    """
    global _ENFORCER
    with _LOCK:
        if _ENFORCER is None:
            enforcer = policy.Enforcer(conf)
            enforcer.register_defaults(policies.list_rules())
            _ENFORCER = enforcer
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

"""The opt-in eventlet backend; the only module that imports eventlet.

oslo.messaging has deprecated its eventlet executor, so this module is
meant to be deleted one day without touching anything else.
"""

import eventlet  # noqa: I001 -- must patch before anything else loads
from oslo_service import backend


def activate() -> None:
    eventlet.monkey_patch()
    backend.init_backend(backend.BackendType.EVENTLET)

"""The request context that travels with every RPC message."""

from oslo_context import context


class RequestContext(context.RequestContext):
    """A caller's identity and the request id that follows its request."""

    @property
    def is_service(self) -> bool:
        return 'service' in self.roles


def get_admin_context() -> RequestContext:
    """A context for volmig's own internal work (periodic tasks)."""
    return RequestContext(user_id=None, project_id=None, is_admin=True,
                          roles=['admin', 'service'], overwrite=False)


def get_service_context(project_id: str = 'service') -> RequestContext:
    """What a block-storage service acting through volmig.client uses."""
    return RequestContext(user_id='volmig-volume', project_id=project_id,
                          roles=['service'], overwrite=False)

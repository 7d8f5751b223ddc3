"""The request context that travels with every RPC message."""

import typing

from oslo_context import context
from oslo_serialization import jsonutils

# The catalog entries a request carries on to block storage: Cinder's
# endpoint, found in the caller's own catalog (its project substituted),
# as Nova finds it. The rest of a catalog is large and of no use here.
BLOCK_STORAGE_TYPES = frozenset({'volumev3', 'block-storage', 'volume'})


def _block_storage(catalog: typing.Iterable[dict] | None) -> list[dict]:
    return [service for service in catalog or ()
            if service.get('type') in BLOCK_STORAGE_TYPES]


class RequestContext(context.RequestContext):
    """A caller's identity and the request id that follows its request.

    ``service_catalog`` is the block-storage part of the caller's
    Keystone catalog (keystonemiddleware's ``X-Service-Catalog``, v2
    shape): where volmig reaches Cinder as that caller.
    """

    FROM_DICT_EXTRA_KEYS = ['service_catalog', 'sender']

    def __init__(self, *args, service_catalog=None, sender=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.service_catalog = _block_storage(service_catalog)
        # Who sent the RPC message this request came in, as its
        # seal proves (``volmig.signing.Sender``; ``signing.Unsigned`` for
        # a message received unsigned while the operator allows it); None
        # for a request not received over RPC. Never sent on: each
        # receiver learns it anew.
        self.sender = sender

    @property
    def is_service(self) -> bool:
        return 'service' in self.roles

    @property
    def sees_every_project(self) -> bool:
        """Admins, and services acting for users, see every project."""
        return self.is_admin or self.is_service

    def to_dict(self) -> dict:
        values = super().to_dict()
        values['service_catalog'] = self.service_catalog
        return values

    @classmethod
    def from_environ(cls, environ, **kwargs):
        catalog = environ.get('HTTP_X_SERVICE_CATALOG')
        if catalog:
            kwargs.setdefault('service_catalog', jsonutils.loads(catalog))
        return super().from_environ(environ, **kwargs)

    def for_volmig(self) -> 'RequestContext':
        """This request, served with volmig's own credentials rather than
        the caller's token: for what the block-storage service asks of
        volmig (its swaps), which concerns volumes of any project."""
        values = self.to_dict()
        values.update(auth_token=None, service_catalog=None)
        return type(self).from_dict(values, overwrite=False)


def get_admin_context() -> RequestContext:
    """A context for volmig's own internal work (periodic tasks)."""
    return RequestContext(user_id=None, project_id=None, is_admin=True,
                          roles=['admin', 'service'], overwrite=False)


def get_service_context(project_id: str | None = 'service') -> RequestContext:
    """What a block-storage service acting through volmig.client uses."""
    return RequestContext(user_id='volmig-volume', project_id=project_id,
                          roles=['service'], overwrite=False)


"""Checks on what callers send to volmig-api over RPC."""

from oslo_utils import uuidutils

from volmig import exception


def require_uuid(field: str, value) -> None:
    if not isinstance(value, str):
        raise exception.InvalidInput(
            field=field, reason='expected a UUID string, got %s' %
            type(value).__name__)
    if not uuidutils.is_uuid_like(value):
        raise exception.InvalidInput(field=field,
                                     reason='%r is not a UUID' % value)


def require_filters(filters, allowed: tuple[str, ...]) -> None:
    if not isinstance(filters, dict):
        raise exception.InvalidInput(
            field='filters', reason='expected a mapping, got %s' %
            type(filters).__name__)
    for key, value in filters.items():
        if key not in allowed:
            raise exception.InvalidInput(
                field='filters', reason='unknown filter %r; known: %s' %
                (key, ', '.join(allowed)))
        if not isinstance(value, str):
            raise exception.InvalidInput(
                field=key, reason='expected a string, got %s' %
                type(value).__name__)

"""Checks on what callers send to volmig-api.

RPC arguments from the block-storage client are checked by hand; REST
bodies against JSON schemas, per microversion: an action declares
``@schema(BODY)``, or several ``@schema(BODY_2_61, min_version=...)``, and
the first that covers the request's version applies. A mismatch is a 400
naming the field.
"""

import functools
import re

import jsonschema
from oslo_utils import uuidutils

from volmig import exception

UUID = {'type': 'string', 'format': 'uuid'}
NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255}
NON_NEGATIVE_INT = {'type': 'integer', 'minimum': 0}
POSITIVE_INT = {'type': 'integer', 'minimum': 1}
ATTACH_MODE = {'type': 'string', 'enum': ['rw', 'ro']}

_FORMATS = jsonschema.FormatChecker(formats=())
# No field of volmig's has a use for them, and PostgreSQL refuses NUL.
_CONTROL = re.compile('[\x00-\x1f\x7f]')


@_FORMATS.checks('uuid')
def _is_uuid(value) -> bool:
    return not isinstance(value, str) or uuidutils.is_uuid_like(value)


def validate(body, body_schema: dict) -> None:
    validator = jsonschema.Draft202012Validator(body_schema,
                                                format_checker=_FORMATS)
    error = jsonschema.exceptions.best_match(validator.iter_errors(body))
    if error is not None:
        raise exception.InvalidInput(
            field='/'.join(str(p) for p in error.absolute_path) or 'body',
            reason=error.message)
    _refuse_control_characters(body, [])


def _refuse_control_characters(value, path: list) -> None:
    if isinstance(value, str):
        if _CONTROL.search(value):
            raise exception.InvalidInput(
                field='/'.join(path) or 'body',
                reason='control characters are not allowed')
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_control_characters(item, path + [str(key)])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_control_characters(item, path + [str(index)])


def schema(body_schema: dict, min_version=None, max_version=None):
    def decorator(action):
        if hasattr(action, 'schemas'):
            # Another @schema of the same action, for other versions.
            action.schemas.append((min_version, max_version, body_schema))
            return action

        @functools.wraps(action)
        def wrapper(controller, req, *args, body=None, **kwargs):
            for low, high, candidate in wrapper.schemas:
                if ((low is None or req.api_version >= low)
                        and (high is None or req.api_version <= high)):
                    validate(body, candidate)
                    break
            return action(controller, req, *args, body=body, **kwargs)
        wrapper.schemas = [(min_version, max_version, body_schema)]
        return wrapper
    return decorator


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
        _refuse_control_characters(value, [key])

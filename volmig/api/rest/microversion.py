"""Compute API microversions, read with microversion-parse.

Each version is recorded in ``doc/source/rest_api_version_history.rst``.
"""

import microversion_parse

from volmig import exception

SERVICE_TYPE = 'compute'
LEGACY_HEADERS = ('x-openstack-nova-api-version',)

MIN = microversion_parse.Version(2, 1)
# Nova's: a multiattach volume may be attached.
MULTIATTACH = microversion_parse.Version(2, 60)
# volmig's: attach_mode, and multi-create sharing a multiattach volume.
ATTACH_MODE = microversion_parse.Version(2, 61)
# Nova's: an attachment shows its block-storage attachment_id, not "id";
# Cinder asks for it before it deletes an attachment. 2.62 to 2.88 change
# nothing in the part of Nova's API that volmig serves.
ATTACHMENT_ID = microversion_parse.Version(2, 89)
MAX = ATTACHMENT_ID


class VersionNotAcceptable(exception.VolmigException):
    msg_fmt = ('Version %(version)s is not supported by the API. Minimum '
               'is %(min)s and maximum is %(max)s.')
    code = 406


def from_headers(headers) -> microversion_parse.Version:
    """The request's version; the minimum when it names none."""
    try:
        text = microversion_parse.get_version(
            headers, SERVICE_TYPE, legacy_headers=LEGACY_HEADERS)
    except ValueError as exc:
        raise exception.InvalidInput(field='OpenStack-API-Version',
                                     reason=str(exc))
    if text is None:
        return MIN
    if text == 'latest':
        return MAX
    try:
        version = microversion_parse.parse_version_string(text)
    except (TypeError, ValueError):
        raise exception.InvalidInput(
            field='OpenStack-API-Version',
            reason='%r is not a version of the form X.Y' % text)
    if not MIN <= version <= MAX:
        raise VersionNotAcceptable(version=text, min=MIN, max=MAX)
    return version


def response_headers(version: microversion_parse.Version) -> dict:
    return {'OpenStack-API-Version': '%s %s' % (SERVICE_TYPE, version),
            'X-OpenStack-Nova-API-Version': str(version),
            'Vary': 'OpenStack-API-Version, X-OpenStack-Nova-API-Version'}

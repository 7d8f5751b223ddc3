"""What an image may be called: the REST API's imageRef and every
compute driver's image store share this one rule."""

import re

from volmig import exception

NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')


def check(name: str) -> str:
    if not NAME.match(name or ''):
        raise exception.InvalidInput(
            field='imageRef', reason='%r is not an image name: letters, '
            'digits, ".", "_" and "-", at most 64' % (name,))
    return name

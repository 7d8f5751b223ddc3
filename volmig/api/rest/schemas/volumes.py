"""Bodies of ``POST /os-volumes`` and ``POST /os-volumes/{id}/action``."""

from volmig.api import validation

create = {
    'type': 'object',
    'properties': {
        'volume': {
            'type': 'object',
            'properties': {
                'size': validation.POSITIVE_INT,
                # For small test volumes; overrides size.
                'size_mb': validation.POSITIVE_INT,
                'display_name': {'type': ['string', 'null'],
                                 'maxLength': 255},
                'display_description': {'type': ['string', 'null'],
                                        'maxLength': 255},
                'multiattach': {'type': 'boolean'},
                'pool': {'type': 'string', 'minLength': 1,
                         'maxLength': 255},
            },
            'anyOf': [{'required': ['size']}, {'required': ['size_mb']}],
            'additionalProperties': False,
        },
    },
    'required': ['volume'],
    'additionalProperties': False,
}

action = {
    'type': 'object',
    'properties': {
        'os-migrate_volume': {
            'type': 'object',
            'properties': {
                'pool': {'type': 'string', 'minLength': 1,
                         'maxLength': 255},
                'max_bandwidth_mbps': validation.POSITIVE_INT,
            },
            'required': ['pool'],
            'additionalProperties': False,
        },
    },
    'required': ['os-migrate_volume'],
    'additionalProperties': False,
}

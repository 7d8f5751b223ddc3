"""Body of ``POST /os-volume-pools/{pool}/action``."""

from volmig.api import validation

action = {
    'type': 'object',
    'properties': {
        'drain': {
            'type': 'object',
            'properties': {
                'to': {'type': 'string', 'minLength': 1, 'maxLength': 255},
                'max_parallel': validation.POSITIVE_INT,
                'max_bandwidth_mbps': validation.POSITIVE_INT,
                'dry_run': {'type': 'boolean'},
            },
            'required': ['to'],
            'additionalProperties': False,
        },
        'cancel_drain': {'type': 'null'},
    },
    'minProperties': 1,
    'maxProperties': 1,
    'additionalProperties': False,
}

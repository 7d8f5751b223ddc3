"""Body of ``POST /os-volume-migrations/{id}/action``."""

action = {
    'type': 'object',
    'properties': {
        'abort': {'type': 'null'},
        'force_complete': {'type': 'null'},
    },
    'minProperties': 1,
    'maxProperties': 1,
    'additionalProperties': False,
}

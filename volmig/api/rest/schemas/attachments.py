"""Bodies of ``POST`` and ``PUT .../os-volume_attachments``."""

import copy

from volmig.api import validation

create: dict = {
    'type': 'object',
    'properties': {
        'volumeAttachment': {
            'type': 'object',
            'properties': {
                'volumeId': validation.UUID,
                # Nova ignores it with libvirt too; the guest names disks.
                'device': {'type': ['string', 'null']},
                'tag': {'type': 'string', 'maxLength': 60},
                'delete_on_termination': {'type': 'boolean'},
            },
            'required': ['volumeId'],
            'additionalProperties': False,
        },
    },
    'required': ['volumeAttachment'],
    'additionalProperties': False,
}

# 2.61: attach_mode.
create_v261 = copy.deepcopy(create)
create_v261['properties']['volumeAttachment']['properties'][
    'attach_mode'] = validation.ATTACH_MODE

# The legacy swap.
update = {
    'type': 'object',
    'properties': {
        'volumeAttachment': {
            'type': 'object',
            'properties': {'volumeId': validation.UUID},
            'required': ['volumeId'],
            'additionalProperties': False,
        },
    },
    'required': ['volumeAttachment'],
    'additionalProperties': False,
}

"""Bodies of ``POST /servers`` and ``POST /servers/{id}/action``."""

import copy

from volmig import image_names
from volmig.api import validation

# Nova bounds a multi-create by quota; volmig has none, so by this.
MAX_COUNT = 100
_COUNT = {'type': 'integer', 'minimum': 1, 'maximum': MAX_COUNT}

_block_device = {
    'type': 'object',
    'properties': {
        'uuid': validation.UUID,
        'source_type': {'enum': ['volume', 'blank', 'image', 'snapshot']},
        'destination_type': {'enum': ['volume', 'local']},
        'boot_index': {'type': ['integer', 'null']},
        'delete_on_termination': {'type': 'boolean'},
        'device_name': {'type': 'string'},
        'volume_size': validation.POSITIVE_INT,
        'tag': {'type': 'string', 'maxLength': 60},
    },
    'required': ['source_type'],
    'additionalProperties': False,
}

create: dict = {
    'type': 'object',
    'properties': {
        'server': {
            'type': 'object',
            'properties': {
                'name': validation.NAME,
                'block_device_mapping_v2': {'type': 'array',
                                            'items': _block_device},
                'min_count': _COUNT,
                'max_count': _COUNT,
                'availability_zone': {'type': 'string', 'minLength': 1,
                                      'maxLength': 255},
                # An image in [qemu] image_dir, booted by its kernel; ""
                # (as Nova clients send) boots from the volume.
                'imageRef': {'type': 'string',
                             'pattern': '^$|' + image_names.NAME.pattern},
                # Accepted so that Nova clients work; not used.
                'flavorRef': {'type': ['string', 'integer']},
                'networks': {'type': ['string', 'array']},
            },
            'required': ['name'],
            'additionalProperties': False,
        },
    },
    'required': ['server'],
    'additionalProperties': False,
}

# 2.61: attach_mode on each block device.
create_v261 = copy.deepcopy(create)
create_v261['properties']['server']['properties'][
    'block_device_mapping_v2']['items']['properties'][
        'attach_mode'] = validation.ATTACH_MODE

action = {
    'type': 'object',
    'properties': {
        'os-stop': {'type': 'null'},
        'os-start': {'type': 'null'},
        'os-getConsoleOutput': {
            'type': 'object',
            'properties': {
                # As Nova: a count of lines, -1 or null for all of them.
                'length': {'type': ['integer', 'string', 'null'],
                           'pattern': '^-?[0-9]+$', 'minimum': -1},
            },
            'additionalProperties': False,
        },
    },
    'minProperties': 1,
    'maxProperties': 1,
    'additionalProperties': False,
}

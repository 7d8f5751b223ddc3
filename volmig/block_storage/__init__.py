"""The one door to block storage (doc/source/design.rst, "Parts")."""

import typing

from stevedore import driver

from volmig.block_storage import base
from volmig.conf import CONF


def get_adapter(conf=CONF) -> base.VolumeAdapter:
    manager: driver.DriverManager = driver.DriverManager(
        'volmig.block_storage.backends', conf.volume.backend,
        invoke_on_load=True, invoke_args=(conf,))
    return typing.cast(base.VolumeAdapter, manager.driver)

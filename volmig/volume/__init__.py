"""The one door to block storage (doc/source/design.rst, "Parts")."""

import typing

from stevedore import driver

from volmig.conf import CONF
from volmig.volume import base


def get_adapter(conf=CONF) -> base.VolumeAdapter:
    manager: driver.DriverManager = driver.DriverManager(
        'volmig.volume.backends', conf.volume.backend, invoke_on_load=True,
        invoke_args=(conf,))
    return typing.cast(base.VolumeAdapter, manager.driver)

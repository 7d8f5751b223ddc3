"""Compute drivers, loaded by name from ``[compute] driver``."""

import typing

from stevedore import driver

from volmig.compute.drivers import base
from volmig.conf import CONF


def load_driver(conf=CONF) -> base.ComputeDriver:
    manager: driver.DriverManager = driver.DriverManager(
        'volmig.compute.drivers', conf.compute.driver, invoke_on_load=True,
        invoke_args=(conf,))
    return typing.cast(base.ComputeDriver, manager.driver)

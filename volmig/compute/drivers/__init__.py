"""Compute drivers, loaded by name from ``[compute] driver``."""

import typing

from oslo_log import log as logging
from stevedore import driver
from stevedore import exception as stevedore_exception
from stevedore import extension

from volmig import exception
from volmig.compute.drivers import base
from volmig.conf import CONF

LOG = logging.getLogger(__name__)
NAMESPACE = 'volmig.compute.drivers'


def load_driver(conf=CONF) -> base.ComputeDriver:
    if not conf.compute.driver:
        raise exception.DriverNotConfigured()
    if conf.compute.driver == 'fake':
        LOG.warning('[compute] driver is "fake": guests live in memory and '
                    'no volume data moves. Use it for tests only.')
    try:
        manager: driver.DriverManager = driver.DriverManager(
            NAMESPACE, conf.compute.driver, invoke_on_load=True,
            invoke_args=(conf,))
    except stevedore_exception.NoMatches:
        known = extension.ExtensionManager(NAMESPACE).names()
        raise exception.UnknownDriver(name=conf.compute.driver,
                                      known=', '.join(sorted(known)))
    return typing.cast(base.ComputeDriver, manager.driver)

"""A libvirt driver step that libvirtd's restart cut short is taken
again once a new libvirtd answers; one that failed with libvirtd there
all along raises at once. No libvirtd needed: the driver's connection
is a counter, as the driver counts its connections."""

import fixtures
import libvirt
from oslotest import base

from tests import fixtures as volmig_fixtures
from volmig import exception
from volmig.compute.drivers.libvirt import restarts
from volmig.conf import CONF


class Driver:
    """A driver whose libvirtd is away for ``away`` looks, then comes
    back on a new connection; each step fails ``failures`` times."""

    def __init__(self, away: int, failures: int):
        self.conf = CONF
        self.connections = 1
        self.away = away
        self.restarted = False
        self.failures = failures
        self.taken = 0

    def answers(self) -> bool:
        if self.away:
            self.away -= 1
            self.restarted = True
            return False
        if self.restarted:
            # A new libvirtd: the driver connects again.
            self.connections += 1
            self.restarted = False
        return True

    @restarts.taken_again
    def migration_switch(self, value):
        self.taken += 1
        if self.failures:
            self.failures -= 1
            raise libvirt.libvirtError('End of file while reading data')
        return value


class TakenAgainTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(volmig_fixtures.ConfFixture()).conf(
            group='libvirt', reconnect_timeout=5)
        self.useFixture(fixtures.MonkeyPatch(
            'volmig.compute.drivers.libvirt.restarts.POLL_INTERVAL', 0))

    def test_a_step_libvirtd_cut_short_is_taken_again(self):
        driver = Driver(away=3, failures=1)
        self.assertEqual('switched', driver.migration_switch('switched'))
        self.assertEqual(2, driver.taken)

    def test_a_step_that_failed_with_libvirtd_there_raises(self):
        driver = Driver(away=0, failures=1)
        self.assertRaises(libvirt.libvirtError, driver.migration_switch,
                          'switched')
        self.assertEqual(1, driver.taken)

    def test_a_libvirtd_that_stays_away_fails_the_step(self):
        self.useFixture(volmig_fixtures.ConfFixture()).conf(
            group='libvirt', reconnect_timeout=0)
        driver = Driver(away=10 ** 6, failures=1)
        self.assertRaises(libvirt.libvirtError, driver.migration_switch,
                          'switched')
        self.assertEqual(1, driver.taken)

    def test_a_driver_error_of_an_away_libvirtd_counts_too(self):
        driver = Driver(away=1, failures=0)

        @restarts.taken_again
        def commit(driver):
            driver.taken += 1
            if driver.taken == 1:
                raise exception.DriverError(action='commit',
                                            reason='no connection')
            return 'committed'
        self.assertEqual('committed', commit(driver))
        self.assertEqual(2, driver.taken)

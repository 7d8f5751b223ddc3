"""``[volmig]`` of cinder.conf, as the README prints it."""

import logging
import os
import subprocess
import sys

import fixtures
from oslo_config import cfg
from oslotest import base

from tests import openstack
from volmig.cinder_volume import opts

GENERATOR = os.path.join(os.path.dirname(sys.executable),
                         'oslo-config-generator')


class CinderOptsTest(base.BaseTestCase):

    def test_generator_prints_the_section_from_the_entry_point(self):
        printed = subprocess.run(
            [GENERATOR, '--namespace', 'volmig.cinder'],
            capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(0, printed.returncode, printed.stderr)
        section = printed.stdout.partition('[volmig]')[2]
        self.assertIn('#transport_url = <None>', section)
        self.assertIn('#timeout = 600', section)

    def test_transport_url_never_reaches_cinders_log(self):
        # cinder-volume logs its whole configuration when it starts.
        conf = cfg.ConfigOpts()
        opts.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('transport_url', 'rabbit://cinder:SECRET@mq:5672/',
                          group='volmig')
        log = self.useFixture(fixtures.FakeLogger(level=logging.DEBUG))
        conf.log_opt_values(logging.getLogger('cinder'), logging.DEBUG)
        self.assertRegex(log.output, r'volmig.transport_url += +\*{4}')
        self.assertNotIn('SECRET', log.output)

    def test_timeout_below_one_second_is_refused(self):
        conf = cfg.ConfigOpts()
        opts.register_opts(conf)
        self.assertRaises(ValueError, conf.set_override, 'timeout', 0,
                          group='volmig')


class OldNameTest(base.BaseTestCase):
    """cinder.conf files that name the plugin as the previous release did."""

    def test_the_old_manager_path_loads_the_same_class_and_says_so(self):
        # In Cinder's own environment: the manager imports Cinder.
        python = os.path.join(openstack.CINDER_VENV, 'bin', 'python')
        loaded = subprocess.run(
            [python, '-c',
             'import logging; logging.basicConfig(); '
             # As cinder-volume does before it loads its manager.
             'from cinder import objects; objects.register_all(); '
             'from oslo_utils import importutils; '
             'from volmig.cinder_volume import manager; '
             'cls = importutils.import_class('
             '"volmig.cinder.manager.VolumeManager"); '
             'print(cls is manager.VolumeManager)'],
            capture_output=True, text=True, timeout=120, check=False)
        self.assertEqual(0, loaded.returncode, loaded.stderr)
        self.assertEqual('True', loaded.stdout.strip())
        self.assertIn('Deprecated: volume_manager = '
                      'volmig.cinder.manager.VolumeManager is deprecated',
                      loaded.stderr)

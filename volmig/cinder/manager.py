"""Deprecated: ``volmig.cinder_volume.manager``, under its old name."""

import logging

from oslo_log import versionutils

from volmig.cinder_volume import manager

versionutils.report_deprecated_feature(
    logging.getLogger(__name__), 'volume_manager = '
    'volmig.cinder.manager.VolumeManager is deprecated: set '
    'volmig.cinder_volume.manager.VolumeManager.')

VolumeManager = manager.VolumeManager

"""Deprecated: the old name of ``volmig.cinder_volume``, kept one release
so that cinder.conf's ``volume_manager =
volmig.cinder.manager.VolumeManager`` still loads."""

"""volmig's plugin for cinder-volume: the proposal driven by Cinder itself.

``volmig.cinder_volume.manager.VolumeManager`` is what cinder-volume
loads with ``volume_manager``; ``volmig.cinder_volume.opts`` is its
``[volmig]`` section of cinder.conf. Only the manager imports Cinder, so
the options load without it (for the sample generator and the docs).
Not to be confused with ``volmig.block_storage.cinder``, volmig's adapter
to a Cinder it runs beside.
"""

"""volmig inside cinder-volume: the proposal driven by Cinder itself.

``volmig.cinder.manager.VolumeManager`` is what cinder-volume loads with
``volume_manager``; ``volmig.cinder.opts`` is its ``[volmig]`` section of
cinder.conf. Only the manager imports Cinder, so the options load without
it (for the sample generator and the docs).
"""

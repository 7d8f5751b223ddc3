"""volmig-volume: the embedded block-storage service
(doc/source/design.rst, "Parts").

Volumes are raw files in pool directories. It drives migrations between
pools as Cinder would, through ``volmig.client``.
"""

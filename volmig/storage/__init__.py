"""volmig-volume: the embedded block-storage service (DESIGN section 2).

Volumes are raw files in pool directories. It drives migrations between
pools as Cinder would, through ``volmig.client``.
"""

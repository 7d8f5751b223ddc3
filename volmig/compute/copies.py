"""Copies of one volume into another, both connected on this host.

volmig carries out Cinder's migration of an attached volume: once the
guest writes to its overlay, src is frozen, and the agent on the guest's
host copies it into the new volume with the verified copy volmig-volume
uses (src hashed as it is read, dst checked from the disk). The caller
asks how a copy stands; an agent that restarted has forgotten it and
answers "unknown", and the caller sends it again: src is still frozen,
so a copy can always be done over.

A drain of a Cinder backend has the agent hash a volume, before Cinder's
own migration and after it, through the same jobs: Cinder does not check
its copy.
"""

import threading
import time

from futurist import ThreadPoolExecutor
from oslo_log import log as logging

from volmig import exception
from volmig.compute import volumes
from volmig.datapath import copy as copy_mod

LOG = logging.getLogger(__name__)

RUNNING, DONE, FAILED, UNKNOWN = 'running', 'done', 'failed', 'unknown'


class VolumeCopies:

    def __init__(self, conf, connector: volumes.VolumeConnector,
                 workers: int = 2):
        self.conf = conf
        self.volumes = connector
        self._executor = ThreadPoolExecutor(max_workers=workers)
        self._lock = threading.Lock()
        self._copies: dict[str, dict] = {}

    def start(self, copy_id: str, src_connection_info: dict,
              dst_connection_info: dict) -> None:
        """Begin a copy, unless it runs or ended well already."""
        self._submit(copy_id, 'Volume copy %s', 'verified', self._copy,
                     src_connection_info, dst_connection_info)

    def checksum(self, copy_id: str, connection_info: dict) -> None:
        """Begin hashing one volume, read from the disk, unless it runs
        or ended well already; its status has the checksum."""
        self._submit(copy_id, 'Volume hash %s', 'done', self._checksum,
                     connection_info)

    def _submit(self, copy_id: str, name: str, ended: str, work,
                *args) -> None:
        with self._lock:
            if self._copies.get(copy_id, {}).get('state') in (RUNNING,
                                                               DONE):
                return
            self._copies[copy_id] = {'state': RUNNING, 'done': 0,
                                     'total': 0}
        self._executor.submit(self._run, copy_id, name % copy_id, ended,
                              work, *args)

    def _run(self, copy_id: str, name: str, ended: str, work,
             *args) -> None:
        began = time.monotonic()
        try:
            checksum = work(copy_id, *args)
        except Exception as exc:
            LOG.exception('%s failed', name)
            self._set(copy_id, state=FAILED,
                      error=exception.safe_message(exc))
            return
        # Its own time, apart from the waits of whoever asks how it goes.
        LOG.info('%(name)s %(ended)s in %(seconds).2f s: sha256 %(sum)s',
                 {'name': name, 'ended': ended, 'sum': checksum,
                  'seconds': time.monotonic() - began})
        self._set(copy_id, state=DONE, checksum=checksum)

    def status(self, copy_id: str) -> dict:
        with self._lock:
            return dict(self._copies.get(copy_id, {'state': UNKNOWN}))

    def _set(self, copy_id: str, **values) -> None:
        with self._lock:
            self._copies[copy_id].update(values)

    def _copy(self, copy_id: str, src_info: dict, dst_info: dict) -> str:
        return copy_mod.checked_copy(
            self.volumes.path(src_info), self.volumes.path(dst_info),
            self.conf, copy_id,
            self.conf.storage.max_bandwidth_mbps * 1024 * 1024,
            lambda done, total: self._set(copy_id, done=done, total=total),
            paced=volumes.on_this_host(src_info))

    def _checksum(self, copy_id: str, info: dict) -> str:
        return copy_mod.checksum(
            self.volumes.path(info), self.conf,
            self.conf.storage.max_bandwidth_mbps * 1024 * 1024,
            paced=volumes.on_this_host(info))

    def stop(self) -> None:
        self._executor.shutdown(wait=False)

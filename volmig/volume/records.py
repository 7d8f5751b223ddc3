"""Volume and attachment records in a JSON file, Cinder-shaped.

The records live under an inter-process lock, so every process on one
host that names the same file sees the same volumes. Both the fake
adapter and volmig-volume keep their records here; what differs is the
connection info a host gets for an attachment.
"""

import contextlib
import json
import os

from oslo_concurrency import lockutils
from oslo_utils import uuidutils

from volmig import atomic_file
from volmig import exception
from volmig.volume import base


class VolumeRecords(base.VolumeAdapter):

    def __init__(self, path: str):
        self._path = path

    @contextlib.contextmanager
    def records(self, write: bool = True):
        directory = os.path.dirname(self._path)
        os.makedirs(directory, exist_ok=True)
        with lockutils.lock('volume-records', external=True,
                            lock_path=directory):
            try:
                with open(self._path) as state_file:
                    records = json.load(state_file)
            except FileNotFoundError:
                records = {'volumes': {}, 'attachments': {}}
            yield records
            if write:
                atomic_file.write_json(self._path, records)

    def connection_info(self, volume: dict, attachment: dict) -> dict:
        """What a host needs to open the volume."""
        return {'driver_volume_type': 'fake',
                'data': {'volume_id': volume['id'],
                         'access_mode': attachment['attach_mode']}}

    @staticmethod
    def present(records, volume: dict) -> dict:
        attachments = [a for a in records['attachments'].values()
                       if a['volume_id'] == volume['id']]
        statuses = {a['attach_status'] for a in attachments}
        if base.ATTACH_ATTACHED in statuses:
            status = 'in-use'
        elif base.ATTACH_ATTACHING in statuses:
            status = 'attaching'
        elif statuses:
            status = 'reserved'
        else:
            status = 'available'
        return dict(volume, status=status, attachments=attachments)

    @staticmethod
    def volume(records, volume_id: str) -> dict:
        try:
            return records['volumes'][volume_id]
        except KeyError:
            raise exception.VolumeNotFound(volume_id=volume_id)

    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None, **extra):
        volume = dict(extra, id=uuidutils.generate_uuid(), name=name,
                      size_mb=size_mb, multiattach=bool(multiattach),
                      pool=pool or 'fake',
                      project_id=getattr(ctxt, 'project_id', None))
        with self.records() as records:
            records['volumes'][volume['id']] = volume
            return self.present(records, volume)

    def update_volume(self, volume_id: str, **values) -> dict:
        with self.records() as records:
            volume = self.volume(records, volume_id)
            volume.update(values)
            return self.present(records, volume)

    def get_volume(self, ctxt, volume_id):
        with self.records(write=False) as records:
            return self.present(records, self.volume(records, volume_id))

    def list_volumes(self, ctxt):
        with self.records(write=False) as records:
            return [self.present(records, volume)
                    for volume in records['volumes'].values()]

    def delete_volume(self, ctxt, volume_id):
        with self.records() as records:
            volume = self.volume(records, volume_id)
            if self.present(records, volume)['attachments']:
                raise exception.Conflict(
                    reason='volume %s is attached' % volume_id)
            del records['volumes'][volume_id]
            return volume

    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        with self.records() as records:
            self.volume(records, volume_id)
            attachment = {'id': uuidutils.generate_uuid(),
                          'volume_id': volume_id,
                          'instance_uuid': instance_uuid,
                          'attach_mode': mode,
                          'attach_status': base.ATTACH_RESERVED,
                          'connector': None, 'connection_info': None}
            records['attachments'][attachment['id']] = attachment
            return attachment

    @staticmethod
    def attachment(records, attachment_id):
        try:
            return records['attachments'][attachment_id]
        except KeyError:
            raise exception.AttachmentNotFound(attachment_id=attachment_id)

    def attachment_get(self, ctxt, attachment_id):
        with self.records(write=False) as records:
            return self.attachment(records, attachment_id)

    def attachment_update(self, ctxt, attachment_id, connector):
        with self.records() as records:
            attachment = self.attachment(records, attachment_id)
            volume = self.volume(records, attachment['volume_id'])
            attachment.update(
                connector=connector, attach_status=base.ATTACH_ATTACHING,
                connection_info=self.connection_info(volume, attachment))
            return attachment

    def attachment_complete(self, ctxt, attachment_id):
        with self.records() as records:
            self.attachment(records, attachment_id)['attach_status'] = (
                base.ATTACH_ATTACHED)

    def attachment_delete(self, ctxt, attachment_id):
        with self.records() as records:
            self.attachment(records, attachment_id)
            del records['attachments'][attachment_id]

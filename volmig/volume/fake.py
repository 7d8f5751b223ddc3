"""A block-storage backend without data, for the fake compute driver.

Its records live in a JSON file under an inter-process lock, so the
conductor, the API and a test playing the block-storage service see the
same volumes when they run as separate processes on one host.
"""

import contextlib
import json
import os

from oslo_concurrency import lockutils
from oslo_utils import uuidutils

from volmig import exception
from volmig.volume import base


class FakeVolumeAdapter(base.VolumeAdapter):

    def __init__(self, conf):
        self._path = conf.volume.fake_state_file

    @contextlib.contextmanager
    def _records(self, write: bool = True):
        directory = os.path.dirname(self._path)
        os.makedirs(directory, exist_ok=True)
        with lockutils.lock('fake-volumes', external=True,
                            lock_path=directory):
            try:
                with open(self._path) as state_file:
                    records = json.load(state_file)
            except FileNotFoundError:
                records = {'volumes': {}, 'attachments': {}}
            yield records
            if not write:
                return
            tmp_path = self._path + '.tmp'
            with open(tmp_path, 'w') as state_file:
                json.dump(records, state_file)
            os.replace(tmp_path, self._path)

    @staticmethod
    def _present(records, volume: dict) -> dict:
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

    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None):
        volume = {'id': uuidutils.generate_uuid(), 'name': name,
                  'size_mb': size_mb, 'multiattach': bool(multiattach),
                  'pool': pool or 'fake'}
        with self._records() as records:
            records['volumes'][volume['id']] = volume
            return self._present(records, volume)

    def get_volume(self, ctxt, volume_id):
        with self._records(write=False) as records:
            if volume_id not in records['volumes']:
                raise exception.VolumeNotFound(volume_id=volume_id)
            return self._present(records, records['volumes'][volume_id])

    def list_volumes(self, ctxt):
        with self._records(write=False) as records:
            return [self._present(records, volume)
                    for volume in records['volumes'].values()]

    def delete_volume(self, ctxt, volume_id):
        with self._records() as records:
            volume = records['volumes'].get(volume_id)
            if volume is None:
                raise exception.VolumeNotFound(volume_id=volume_id)
            if self._present(records, volume)['attachments']:
                raise exception.Conflict(
                    reason='volume %s is attached' % volume_id)
            del records['volumes'][volume_id]

    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        with self._records() as records:
            if volume_id not in records['volumes']:
                raise exception.VolumeNotFound(volume_id=volume_id)
            attachment = {'id': uuidutils.generate_uuid(),
                          'volume_id': volume_id,
                          'instance_uuid': instance_uuid,
                          'attach_mode': mode,
                          'attach_status': base.ATTACH_RESERVED,
                          'connector': None, 'connection_info': None}
            records['attachments'][attachment['id']] = attachment
            return attachment

    @staticmethod
    def _attachment(records, attachment_id):
        try:
            return records['attachments'][attachment_id]
        except KeyError:
            raise exception.AttachmentNotFound(attachment_id=attachment_id)

    def attachment_get(self, ctxt, attachment_id):
        with self._records(write=False) as records:
            return self._attachment(records, attachment_id)

    def attachment_update(self, ctxt, attachment_id, connector):
        with self._records() as records:
            attachment = self._attachment(records, attachment_id)
            attachment.update(
                connector=connector, attach_status=base.ATTACH_ATTACHING,
                connection_info={
                    'driver_volume_type': 'fake',
                    'data': {'volume_id': attachment['volume_id'],
                             'access_mode': attachment['attach_mode']}})
            return attachment

    def attachment_complete(self, ctxt, attachment_id):
        with self._records() as records:
            self._attachment(records, attachment_id)['attach_status'] = (
                base.ATTACH_ATTACHED)

    def attachment_delete(self, ctxt, attachment_id):
        with self._records() as records:
            self._attachment(records, attachment_id)
            del records['attachments'][attachment_id]

"""The ``cinder`` backend: Cinder's volumes and v3 attachments.

python-cinderclient, on a keystoneauth1 session from ``[cinder]``, is
what Nova itself talks to Cinder with: microversion-aware, on a session
that any Keystone auth plugin (or ``none`` / ``admin_token`` with an
endpoint) feeds. Attachments use microversion 3.54, the first to carry
``mode``, so read-only attachments are Cinder's own.

A volmig "pool" of a Cinder volume is its volume type: that is what
decides where Cinder places it and where ``os-retype`` moves it.
"""

import functools

from cinderclient import api_versions
from cinderclient import client as cinder_client
from cinderclient import exceptions as cinder_exc
import futurist
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import service_token
from oslo_log import log as logging

from volmig import exception
from volmig.block_storage import base

LOG = logging.getLogger(__name__)

MICROVERSION = '3.54'
MIB_PER_GIB = 1024


def _reason(exc) -> str:
    return getattr(exc, 'message', None) or str(exc)


def _refusals(action: str, not_found=exception.VolumeNotFound):
    """Cinder's answers as volmig's typed refusals, with Cinder's words."""

    def decorator(method):
        @functools.wraps(method)
        def wrapper(self, ctxt, *args, **kwargs):
            # The id a 404 is about: the method's first argument.
            ref = args[0] if args else None
            try:
                return method(self, ctxt, *args, **kwargs)
            except cinder_exc.NotFound as exc:
                if not_found is None:
                    raise exception.BlockStorageRefused(
                        action=action, reason=_reason(exc))
                if not_found is exception.VolumeNotFound:
                    raise exception.VolumeNotFound(volume_id=ref)
                raise exception.AttachmentNotFound(attachment_id=ref)
            except cinder_exc.ClientException as exc:
                reason = _reason(exc)
                if exc.code == 409:
                    raise exception.BlockStorageConflict(action=action,
                                                         reason=reason)
                if 400 <= exc.code < 500:
                    raise exception.BlockStorageRefused(action=action,
                                                        reason=reason)
                raise exception.BlockStorageUnavailable(action=action,
                                                        reason=reason)
            except ks_exc.ClientException as exc:
                raise exception.BlockStorageUnavailable(
                    action=action, reason=exception.safe_message(exc))
        return wrapper
    return decorator


def _connection_info(flat: dict | None) -> dict | None:
    """Nova's shape: the attachments API gives the driver's ``data``
    flattened beside ``driver_volume_type``."""
    if not flat or 'data' in flat:
        return flat
    data = dict(flat)
    return {'driver_volume_type': data.pop('driver_volume_type', None),
            'data': data}


def _attachment(raw: dict) -> dict:
    """A Cinder attachment in the shape volmig's records have."""
    raw = raw if isinstance(raw, dict) else raw.to_dict()
    return {'id': raw['id'], 'volume_id': raw['volume_id'],
            'instance_uuid': raw.get('instance'),
            'attach_mode': raw.get('attach_mode') or 'rw',
            'attach_status': raw['status'],
            'connection_info': _connection_info(raw.get('connection_info'))}


def _volume(raw, attachments: list[dict]) -> dict:
    raw = raw.to_dict()
    return {'id': raw['id'], 'name': raw.get('name'),
            'size_mb': raw['size'] * MIB_PER_GIB,
            'multiattach': bool(raw.get('multiattach')),
            'pool': raw.get('volume_type'),
            'status': raw['status'],
            'project_id': raw.get('os-vol-tenant-attr:tenant_id'),
            'migration_status': raw.get('migration_status'),
            'attachments': [a for a in attachments
                            if a['attach_status'] != 'detached']}


class CinderVolumeAdapter(base.VolumeAdapter):

    def __init__(self, conf):
        section = conf.cinder
        auth = ks_loading.load_auth_from_conf_options(conf, 'cinder')
        if section.send_service_token and section.auth_type != 'none':
            auth = service_token.ServiceTokenAuthWrapper(auth, auth)
        session = ks_loading.load_session_from_conf_options(
            conf, 'cinder', auth=auth)
        self._client = cinder_client.Client(
            api_versions.APIVersion(MICROVERSION), session=session,
            service_type=section.service_type,
            interface=section.valid_interfaces or 'public',
            region_name=section.region_name,
            endpoint_override=section.endpoint_override,
            connect_retries=section.connect_retries)
        # A volume and its attachments are two reads from cinder-api,
        # made at once: a migration's start waits on them.
        self._reads = futurist.ThreadPoolExecutor(max_workers=4)

    def _attachments_of(self, volume_id: str | None = None) -> list[dict]:
        search = {'volume_id': volume_id} if volume_id else None
        return [_attachment(a) for a in self._client.attachments.list(
            detailed=True, search_opts=search)]

    @_refusals('create a volume', not_found=None)
    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None):
        if size_mb % MIB_PER_GIB:
            raise exception.InvalidInput(
                field='size_mb', reason='Cinder sizes volumes in whole GiB '
                '(%d MiB is not)' % size_mb)
        # Cinder makes a volume multiattach through its type.
        volume = self._client.volumes.create(
            size_mb // MIB_PER_GIB, name=name, volume_type=pool)
        if bool(volume.multiattach) != bool(multiattach):
            self._client.volumes.delete(volume.id)
            raise exception.InvalidInput(
                field='multiattach', reason='volume type %r makes %s '
                'volumes' % (pool, 'multiattach' if volume.multiattach
                             else 'single-attach'))
        return _volume(volume, [])

    @_refusals('show a volume')
    def get_volume(self, ctxt, volume_id):
        attachments = self._reads.submit(self._attachments_of, volume_id)
        volume = self._client.volumes.get(volume_id)
        return _volume(volume, attachments.result())

    @_refusals('show a volume')
    def volume_size_mb(self, ctxt, volume_id):
        # The volume alone: get_volume lists its attachments too.
        return self._client.volumes.get(volume_id).size * MIB_PER_GIB

    @_refusals('list volumes', not_found=None)
    def list_volumes(self, ctxt):
        volumes = self._client.volumes.list()
        attachments = self._attachments_of()
        return [_volume(volume, [a for a in attachments
                                 if a['volume_id'] == volume.id])
                for volume in volumes]

    @_refusals('delete a volume')
    def delete_volume(self, ctxt, volume_id):
        self._client.volumes.delete(volume_id)

    @_refusals('reserve a volume')
    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        return _attachment(self._client.attachments.create(
            volume_id, None, instance_id=instance_uuid, mode=mode))

    @_refusals('show an attachment', exception.AttachmentNotFound)
    def attachment_get(self, ctxt, attachment_id):
        return _attachment(self._client.attachments.show(attachment_id))

    @_refusals('connect an attachment', exception.AttachmentNotFound)
    def attachment_update(self, ctxt, attachment_id, connector):
        return _attachment(self._client.attachments.update(attachment_id,
                                                           connector))

    @_refusals('complete an attachment', exception.AttachmentNotFound)
    def attachment_complete(self, ctxt, attachment_id):
        self._client.attachments.complete(attachment_id)

    @_refusals('delete an attachment', exception.AttachmentNotFound)
    def attachment_delete(self, ctxt, attachment_id):
        self._client.attachments.delete(attachment_id)

    @_refusals('complete a migration')
    def migrate_volume_completion(self, ctxt, volume_id: str,
                                  new_volume_id: str, error: bool) -> None:
        """Tell Cinder its migration of ``volume_id`` ended."""
        self._client.volumes.migrate_volume_completion(
            volume_id, new_volume_id, error)

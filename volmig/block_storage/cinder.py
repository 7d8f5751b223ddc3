"""The ``cinder`` backend: Cinder's volumes and v3 attachments.

python-cinderclient, on a keystoneauth1 session from ``[cinder]``, is
what Nova itself talks to Cinder with: microversion-aware, on a session
that any Keystone auth plugin (or ``none`` / ``admin_token`` with an
endpoint) feeds. Attachments use microversion 3.54, the first to carry
``mode``, so read-only attachments are Cinder's own.

A volmig "pool" of a Cinder volume is its volume type: that is what
decides where Cinder places it and where ``os-retype`` moves it.

Who volmig is in Cinder follows Nova: a call that a user's request causes
carries that user's token, with volmig's own as the service token, so the
volume, its attachments and the quota are the user's project's, and
another project's volume is not found. A call that no user asked for (a
context without a token: Cinder's swaps, healing, recovery) uses volmig's
own credentials, which need Cinder's admin role, and lists with
``all_tenants``: the volume it concerns may be any project's.
"""

import functools

from cinderclient import api_versions
from cinderclient import client as cinder_client
from cinderclient import exceptions as cinder_exc
import futurist
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import plugin
from keystoneauth1 import service_token
from keystoneauth1.access import service_catalog
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
            # Its cinder-volume (host@backend#pool): an admin's view only.
            'host': raw.get('os-vol-host-attr:host'),
            'attachments': [a for a in attachments
                            if a['attach_status'] != 'detached']}


class CallerAuth(plugin.BaseAuthPlugin):
    """The token of the user whose request this is, and Cinder's endpoint
    from the catalog that came with it (Nova's context auth plugin)."""

    def __init__(self, token: str, catalog: list[dict]):
        super().__init__()
        self._token = token
        self._catalog = service_catalog.ServiceCatalogV2(catalog)

    def get_token(self, session, **kwargs):
        return self._token

    def get_endpoint(self, session, service_type=None, interface=None,
                     region_name=None, service_name=None, **kwargs):
        return self._catalog.url_for(
            service_type=service_type, interface=interface,
            region_name=region_name, service_name=service_name)


class CinderVolumeAdapter(base.VolumeAdapter):

    def __init__(self, conf):
        section = conf.cinder
        self._auth = ks_loading.load_auth_from_conf_options(conf, 'cinder')
        # No Keystone (auth_type none): there are no users to act for.
        self._keystone = section.auth_type not in (None, 'none')
        self._send_service_token = (section.send_service_token
                                    and self._keystone)
        self._session = ks_loading.load_session_from_conf_options(
            conf, 'cinder', auth=self._auth)
        self._options = dict(
            service_type=section.service_type,
            interface=section.valid_interfaces or 'public',
            region_name=section.region_name,
            endpoint_override=section.endpoint_override,
            connect_retries=section.connect_retries)
        self._own = self._client(
            service_token.ServiceTokenAuthWrapper(self._auth, self._auth)
            if self._send_service_token else self._auth)
        # A volume and its attachments are two reads from cinder-api,
        # made at once: a migration's start waits on them.
        self._reads = futurist.ThreadPoolExecutor(max_workers=4)

    def _client(self, auth):
        return cinder_client.Client(
            api_versions.APIVersion(MICROVERSION), session=self._session,
            auth=auth, **self._options)

    def _as_caller(self, ctxt) -> bool:
        """Whether a user's request caused this call (its token came
        along), rather than volmig's own work."""
        return self._keystone and bool(getattr(ctxt, 'auth_token', None))

    def _cinder(self, ctxt):
        """Cinder as the caller, or as volmig itself."""
        if not self._as_caller(ctxt):
            return self._own
        auth = CallerAuth(ctxt.auth_token, ctxt.service_catalog)
        if self._send_service_token:
            auth = service_token.ServiceTokenAuthWrapper(auth, self._auth)
        return self._client(auth)

    def _all_projects(self, ctxt) -> dict:
        """``all_tenants`` where the one asking may see every project's:
        volmig itself, or an admin user. Cinder honours it for admins
        only; from anyone else it is a filter Cinder does not know."""
        if not self._as_caller(ctxt) or ctxt.is_admin:
            return {'all_tenants': 1}
        return {}

    def _attachments_of(self, cinder, ctxt, volume_id: str | None = None
                        ) -> list[dict]:
        """The attachments ``cinder`` (the client of ``ctxt``) sees."""
        search = self._all_projects(ctxt)
        if volume_id:
            search['volume_id'] = volume_id
        listed = cinder.attachments.list(detailed=True, search_opts=search)
        return [_attachment(a) for a in listed]

    @_refusals('create a volume', not_found=None)
    def create_volume(self, ctxt, size_mb, name=None, multiattach=False,
                      pool=None):
        if size_mb % MIB_PER_GIB:
            raise exception.InvalidInput(
                field='size_mb', reason='Cinder sizes volumes in whole GiB '
                '(%d MiB is not)' % size_mb)
        # Cinder makes a volume multiattach through its type.
        cinder = self._cinder(ctxt)
        volume = cinder.volumes.create(
            size_mb // MIB_PER_GIB, name=name, volume_type=pool)
        if bool(volume.multiattach) != bool(multiattach):
            cinder.volumes.delete(volume.id)
            raise exception.InvalidInput(
                field='multiattach', reason='volume type %r makes %s '
                'volumes' % (pool, 'multiattach' if volume.multiattach
                             else 'single-attach'))
        return _volume(volume, [])

    @_refusals('show a volume')
    def get_volume(self, ctxt, volume_id):
        cinder = self._cinder(ctxt)
        attachments = self._reads.submit(self._attachments_of, cinder, ctxt,
                                         volume_id)
        volume = cinder.volumes.get(volume_id)
        return _volume(volume, attachments.result())

    @_refusals('show a volume')
    def volume_size_mb(self, ctxt, volume_id):
        # The volume alone: get_volume lists its attachments too.
        return self._cinder(ctxt).volumes.get(volume_id).size * MIB_PER_GIB

    @_refusals('list volumes', not_found=None)
    def list_volumes(self, ctxt, limit=None, marker=None):
        cinder = self._cinder(ctxt)
        # Cinder pages its own list, oldest first as volmig's.
        volumes = cinder.volumes.list(search_opts=self._all_projects(ctxt),
                                      limit=limit, marker=marker,
                                      sort='created_at:asc,id:asc')
        attachments = self._attachments_of(cinder, ctxt)
        return [_volume(volume, [a for a in attachments
                                 if a['volume_id'] == volume.id])
                for volume in volumes]

    @_refusals('delete a volume')
    def delete_volume(self, ctxt, volume_id):
        self._cinder(ctxt).volumes.delete(volume_id)

    @_refusals('reserve a volume')
    def attachment_create(self, ctxt, volume_id, instance_uuid, mode='rw'):
        return _attachment(self._cinder(ctxt).attachments.create(
            volume_id, None, instance_id=instance_uuid, mode=mode))

    @_refusals('show an attachment', exception.AttachmentNotFound)
    def attachment_get(self, ctxt, attachment_id):
        return _attachment(self._cinder(ctxt).attachments.show(
            attachment_id))

    @_refusals('connect an attachment', exception.AttachmentNotFound)
    def attachment_update(self, ctxt, attachment_id, connector):
        return _attachment(self._cinder(ctxt).attachments.update(
            attachment_id, connector))

    @_refusals('complete an attachment', exception.AttachmentNotFound)
    def attachment_complete(self, ctxt, attachment_id):
        self._cinder(ctxt).attachments.complete(attachment_id)

    @_refusals('delete an attachment', exception.AttachmentNotFound)
    def attachment_delete(self, ctxt, attachment_id):
        self._cinder(ctxt).attachments.delete(attachment_id)

    @_refusals('mark an attachment detached')
    def mark_detached(self, ctxt, volume_id, attachment_id):
        # os-detach of an attachment that is gone deletes nothing and
        # disconnects nothing: Cinder sets the volume's status from the
        # attachments it has.
        self._cinder(ctxt).volumes.detach(volume_id, attachment_id)

    @_refusals('list pools', not_found=None)
    def pools(self, ctxt) -> list[str]:
        """Cinder's pools (``host@backend#pool``), as its scheduler
        knows them: an admin's view."""
        return [pool.name for pool in self._cinder(ctxt).pools.list()]

    @_refusals('migrate a volume')
    def migrate_volume(self, ctxt, volume_id, pool,
                       max_bandwidth_mbps=None):
        """Cinder's own migration to ``pool`` (a backend's pool,
        ``host@backend#pool``): a copy for a detached volume, Nova's swap
        for one attached to a running server. Returns once Cinder has
        accepted it, with the volume as it is then; Cinder caps no
        bandwidth."""
        cinder = self._cinder(ctxt)
        # Locked: nobody else may act on the volume until it is done.
        cinder.volumes.migrate_volume(volume_id, pool, False, True)
        return self.get_volume(ctxt, volume_id)

    @_refusals('complete a migration')
    def migrate_volume_completion(self, ctxt, volume_id: str,
                                  new_volume_id: str, error: bool) -> None:
        """Tell Cinder its migration of ``volume_id`` ended."""
        self._cinder(ctxt).volumes.migrate_volume_completion(
            volume_id, new_volume_id, error)

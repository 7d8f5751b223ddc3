"""Which block-storage host may drive which migration.

Block storage drives migrations through volmig-api's RPC face, and the
kind of block storage a deployment uses (``[volume] backend``) is the
only kind whose hosts may:

- volmig-volume's nodes share their volumes' records (each holds the
  database credentials those need), so a volume node may drive the
  migration of any volmig-volume volume, and none of Cinder's;
- a cinder-volume host (a ``volmig-client`` key exported for its
  ``[DEFAULT] host``) starts, cancels and completes the migrations of the
  volumes on its own backends only: the source volume's Cinder host names
  it, and a complete's destination is the volume Cinder made for that
  migration (``migration_status`` ``target:<source id>``).

Reads (``migration_get``, ``migration_list``) are any block-storage
host's: the records they show are block storage's own. The ``fake``
backend, which keeps records and no data, stands in for either kind in
tests.
"""

from volmig import block_storage
from volmig import context as volmig_context
from volmig import signing
from volmig.conf import CONF
from volmig.db import api as db
from volmig.db import instances as instances_db

# The kinds of host that drive the migrations of each backend's volumes.
DRIVERS = {'file': (signing.VOLUME,), 'cinder': (signing.CLIENT,),
           'fake': (signing.VOLUME, signing.CLIENT)}


def _cinder_host(volume: dict) -> str:
    """A Cinder volume's host: ``host@backend#pool``'s first part."""
    return (volume.get('host') or '').partition('@')[0]


def _volume_id(ctxt, src_attachment_id: str) -> str:
    """The volume of a migration's source attachment: its migration's, if
    it has one (a complete asked again after the switch, whose mapping
    names dst already), else its mapping's."""
    migration = db.migration_get_latest_by_src_attachment(
        ctxt, src_attachment_id)
    if migration is not None:
        return migration['volume_id']
    return instances_db.bdm_get_by_attachment(
        ctxt, src_attachment_id)['volume_id']


class Senders:

    def __init__(self):
        self._volume_api = None

    @property
    def volume_api(self):
        if self._volume_api is None:
            self._volume_api = block_storage.get_adapter()
        return self._volume_api

    def check(self, ctxt, method: str, src_attachment_id: str,
              dst_attachment_id: str | None = None) -> None:
        """Refuses a block-storage sender's call on another's volume."""
        sender = ctxt.sender
        if sender is None or sender.service == signing.CONTROLLER:
            return
        kinds = DRIVERS.get(CONF.volume.backend, ())
        if not isinstance(sender, signing.Unsigned) and \
                sender.service not in kinds:
            signing.refuse(method, sender, 'host',
                           'the volumes of this deployment are %s\'s'
                           % ' or '.join(kinds))
        if CONF.volume.backend != 'cinder':
            return
        own = volmig_context.get_admin_context()
        volume = self.volume_api.get_volume(
            own, _volume_id(own, src_attachment_id))
        signing.check_host(ctxt, _cinder_host(volume), method,
                           service=signing.CLIENT)
        if dst_attachment_id is not None:
            attachment = self.volume_api.attachment_get(own,
                                                        dst_attachment_id)
            dst = self.volume_api.get_volume(own, attachment['volume_id'])
            if dst.get('migration_status') != 'target:%s' % volume['id']:
                signing.refuse(method, sender, 'host',
                               'volume %s is not the one Cinder made to '
                               'migrate volume %s' % (dst['id'],
                                                      volume['id']))

"""The legacy swap (doc/source/design.rst, "Contracts"): two attachments
at once, and the agent's block copy from one volume to the other.

The conductor records the new attachment it made on the mapping
(``swap_to``) before the agent hears of the swap; the agent's report of
the end names that attachment, and everything else is taken from the
records.
"""

from oslo_log import log as logging

from volmig import signing
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import cinder_moves
from volmig.conductor import instances as instances_mod
from volmig.conductor import rules
from volmig.db import api as db
from volmig.db import instances as instances_db
from volmig.db import services as service_db

LOG = logging.getLogger(__name__)


class SwapConductor:

    def __init__(self, instances: instances_mod.InstanceConductor,
                 moves: cinder_moves.CinderMoves):
        self.instances = instances
        self.volume_api = instances.volume_api
        self.compute_api = instances.compute_api
        self.cinder_moves = moves

    def swap_volume(self, ctxt, instance_uuid: str, old_volume_id: str,
                    new_volume_id: str) -> dict:
        """Connect the new volume, then have the agent copy and switch.

        Block storage asks this (Cinder, for its migrations), not a user:
        volmig acts with its own credentials, for volumes of any project.
        """
        ctxt = ctxt.for_volmig()
        old_bdm = instances_db.bdm_get_by_volume(ctxt, instance_uuid,
                                                 old_volume_id)
        instance = instances_db.instance_get(ctxt, instance_uuid)
        rules.check_instance_idle(instance, 'swap a volume of')
        old_volume = self.volume_api.get_volume(ctxt, old_volume_id)
        new_volume = self.volume_api.get_volume(ctxt, new_volume_id)
        if cinder_moves.cinder_initiated(old_volume, new_volume):
            # Cinder migrates the volume: volmig's live path, not a copy
            # by the hypervisor, and one move for all its attachments.
            self.cinder_moves.request(ctxt, instance, old_bdm, old_volume,
                                      new_volume)
            return old_bdm
        rules.check_can_swap(old_volume, new_volume,
                             db.migrations_in_progress(ctxt, old_volume_id))
        rules.check_can_attach(new_volume, db.migrations_in_progress(
            ctxt, new_volume_id))
        service = service_db.get(ctxt, compute_rpcapi.BINARY, instance['host'])
        rules.check_compute_version(
            service['host'], 'volume swap', compute_rpcapi.SWAP_VERSION,
            self.compute_api.can_send_version(compute_rpcapi.SWAP_VERSION,
                                              service['version']))
        instance = self.instances.begin_task(
            ctxt, instance_uuid, 'swap a volume of', states.TASK_SWAPPING)
        try:
            attachment = self.instances.connect(ctxt, instance, new_volume,
                                                old_bdm['attach_mode'])
        except Exception:
            instances_db.instance_update(ctxt, instance_uuid,
                                         {'task_state': None})
            raise
        swap_to = {'volume_id': new_volume_id,
                   'attachment_id': attachment['id'],
                   'connection_info': attachment['connection_info']}
        # Recorded before the agent hears of it: its report of the end
        # names this attachment, and the records say what it stands for.
        instances_db.bdm_update(ctxt, old_bdm['id'], {'swap_to': swap_to})
        new_bdm = dict(old_bdm, swap_to=None, **swap_to)
        try:
            self.compute_api.swap_volume(ctxt, instance['host'], instance,
                                         old_bdm, new_bdm)
        except Exception:
            self.swap_failed(ctxt, instance_uuid, new_bdm)
            raise
        LOG.info('Swapping volume %(old)s for %(new)s',
                 {'old': old_volume_id, 'new': new_volume_id},
                 instance_uuid=instance_uuid)
        return new_bdm

    @staticmethod
    def _swapping(ctxt, instance_uuid: str, new_bdm: dict) -> dict:
        """The server's mapping whose swap made the attachment that an
        agent's report names: the report's other values are not used."""
        attachment_id = (new_bdm or {}).get('attachment_id')
        for bdm in instances_db.bdm_get_all(ctxt, instance_uuid=instance_uuid):
            if attachment_id and (bdm['swap_to'] or {}).get(
                    'attachment_id') == attachment_id:
                return bdm
        signing.refuse('a swap report', getattr(ctxt, 'sender', None),
                       'host', 'attachment %s is not one that a swap of '
                       'server %s made' % (attachment_id, instance_uuid))

    def volume_swapped(self, ctxt, instance_uuid: str, old_bdm: dict,
                       new_bdm: dict) -> dict:
        """The guest is on the new volume: keep one attachment, its own."""
        bdm = self._swapping(ctxt, instance_uuid, new_bdm)
        swap_to, old_attachment_id = bdm['swap_to'], bdm['attachment_id']
        self.volume_api.attachment_complete(ctxt, swap_to['attachment_id'])
        bdm = instances_db.bdm_update(ctxt, bdm['id'],
                                      dict(swap_to, swap_to=None))
        self.volume_api.attachment_delete(ctxt, old_attachment_id)
        instances_db.instance_update(ctxt, instance_uuid,
                                     {'task_state': None})
        return bdm

    def swap_failed(self, ctxt, instance_uuid: str, new_bdm: dict) -> None:
        """The guest stayed on the old volume: drop the new attachment."""
        bdm = self._swapping(ctxt, instance_uuid, new_bdm)
        self.volume_api.attachment_delete(
            ctxt, bdm['swap_to']['attachment_id'])
        instances_db.bdm_update(ctxt, bdm['id'], {'swap_to': None})
        instances_db.instance_update(ctxt, instance_uuid, {'task_state': None})

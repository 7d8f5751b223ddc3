"""The rules of doc/source/design.rst, "Rules", as pure functions.

Each takes plain records (dicts) and either returns a decision or raises
the typed error the caller sees. Nothing here touches the database, RPC
or block storage, so every refusal is unit-tested directly.
"""

from collections.abc import Iterable

from volmig import exception
from volmig import states

ATTACH_MODES = ('rw', 'ro')


def check_attach_mode(mode) -> None:
    if not isinstance(mode, str) or mode not in ATTACH_MODES:
        raise exception.InvalidAttachMode(mode=mode)


# What an agent may report of its guests' power.
POWER_STATES = (states.POWER_NOSTATE, states.POWER_RUNNING,
                states.POWER_SHUTDOWN)
REPORTED_VM_STATES = (states.VM_ACTIVE, states.VM_STOPPED)


def check_power_report(power_state, vm_state=states.VM_ACTIVE) -> None:
    """An agent's report on its own guest names states volmig knows."""
    if power_state not in POWER_STATES or vm_state not in \
            REPORTED_VM_STATES:
        raise exception.InvalidInput(
            field='power report', reason='power_state must be one of %s and '
            'vm_state one of %s, not %r and %r' % (
                ', '.join(POWER_STATES), ', '.join(REPORTED_VM_STATES),
                power_state, vm_state))


def check_block_device(block_device: dict) -> None:
    """One entry of a build request's block device list."""
    if (block_device.get('destination_type') == 'local'
            and 'attach_mode' in block_device):
        raise exception.Invalid(
            reason='attach_mode is only valid on block devices with '
                   'destination_type=volume')
    if 'attach_mode' in block_device:
        check_attach_mode(block_device['attach_mode'])


def check_block_devices(block_devices: list[dict]) -> None:
    """A build request's block devices: each valid, no volume twice."""
    seen = set()
    for block_device in block_devices:
        check_block_device(block_device)
        volume_id = block_device.get('volume_id')
        if volume_id is None:
            continue
        if volume_id in seen:
            raise exception.Invalid(
                reason='volume %s appears twice in the block device '
                       'mapping' % volume_id)
        seen.add(volume_id)


def check_multi_create(count: int, volumes: Iterable[dict]) -> None:
    if count <= 1:
        return
    for volume in volumes:
        if not volume['multiattach']:
            raise exception.MultiCreateNeedsMultiattach(
                count=count, volume_id=volume['id'])


def check_multiattach_version(volume: dict, version_ok: bool) -> None:
    """A multiattach volume needs microversion 2.60, as in Nova."""
    if volume['multiattach'] and not version_ok:
        raise exception.MultiattachNeedsMicroversion(
            volume_id=volume['id'], what='attach it', version='2.60')


def check_multi_create_version(count: int, volumes: Iterable[dict],
                               version_ok: bool) -> None:
    """Several servers sharing a multiattach volume need 2.61."""
    if count <= 1 or version_ok:
        return
    for volume in volumes:
        if volume['multiattach']:
            raise exception.MultiattachNeedsMicroversion(
                volume_id=volume['id'], version='2.61',
                what='create %d servers that share it' % count)


def check_can_attach(volume: dict,
                     migrations_in_progress: Iterable[dict]) -> None:
    """A new attachment of ``volume`` to one more instance."""
    if any(migrations_in_progress):
        raise exception.MigrationInProgress(
            what='volume %s' % volume['id'],
            reason='new attachments are held back until it ends')
    if not volume['multiattach'] and volume['attachments']:
        raise exception.MultiattachNotSupported(
            volume_id=volume['id'],
            instance_uuid=volume['attachments'][0]['instance_uuid'])


def check_attach_recorded(volume: dict, instance_uuid: str, check: dict,
                          mapping_id: int | None = None) -> None:
    """An attach's check once its mapping (``mapping_id``) is recorded,
    from what ``volmig.db.locks.attach_check`` read under the volume's
    lock: no migration began meanwhile; the server has no older mapping of
    the volume (two attaches of one volume to one server race: the first
    recorded wins); and, unless the volume is multiattach, no other
    server's mapping was recorded meanwhile."""
    check_can_attach(volume, check['migrations'])
    if mapping_id is not None and any(
            mapping['instance_uuid'] == instance_uuid
            and mapping['id'] < mapping_id for mapping in check['mappings']):
        raise exception.Invalid(reason='volume %s is already attached to '
                                'server %s' % (volume['id'], instance_uuid))
    others = [mapping['instance_uuid'] for mapping in check['mappings']
              if mapping['instance_uuid'] != instance_uuid]
    if others and not volume['multiattach']:
        raise exception.MultiattachNotSupported(volume_id=volume['id'],
                                                instance_uuid=others[0])


def check_attachments_seen(volume: dict,
                           attached_instances: Iterable[dict]) -> None:
    """Refuse a start whose view of the volume, read from block storage
    before its decision, misses a server that the volume's mappings hold:
    an attach recorded it meanwhile. The attach goes on; the start is
    tried again, and then decides with the new attachment in view."""
    seen = {attachment['instance_uuid']
            for attachment in volume['attachments']}
    missed = sorted(instance['uuid'] for instance in attached_instances
                    if instance['uuid'] not in seen)
    if missed:
        raise exception.MigrationInProgress(
            what='volume %s' % volume['id'],
            reason='its attachments changed while the migration started '
            '(server %s); start again' % ', '.join(missed))


def check_instance_idle(instance: dict, action: str) -> None:
    """Refuse an action on an instance that has a task in progress."""
    if instance['task_state'] is not None:
        raise exception.InstanceInvalidState(
            action=action, instance_uuid=instance['uuid'],
            task_state=instance['task_state'])


def check_compute_version(host: str, feature: str, needed: str,
                          version_ok: bool) -> None:
    """The agent on ``host`` must speak compute RPC ``needed``."""
    if not version_ok:
        raise exception.ComputeTooOld(host=host, feature=feature,
                                      needed=needed)


def check_no_other_migration(instance: dict, src_attachment_id: str,
                             volume: dict,
                             migrations_in_progress: Iterable[dict]) -> None:
    """Refuse a start while the volume or instance is busy.

    On a multiattach volume, the block-storage service starts one
    migration per attachment, so migrations of the volume's other
    attachments are siblings, not rivals.
    """
    for migration in migrations_in_progress:
        if (migration['src_attachment_id'] == src_attachment_id
                or not volume['multiattach']):
            raise exception.MigrationInProgress(
                what='volume %s' % volume['id'],
                reason='migration %s is %s' % (migration['id'],
                                               migration['status']))
    if instance['task_state'] is not None:
        raise exception.MigrationInProgress(
            what='server %s' % instance['uuid'],
            reason='task_state is %s' % instance['task_state'])


def choose_migration_mode(instance: dict, volume: dict,
                          attached_instances: Iterable[dict],
                          capabilities: dict) -> str:
    """Decide live or offline, or refuse (doc/source/design.rst, "Rules").

    ``attached_instances`` are all instances the volume is attached to.
    """
    attachments = volume['attachments']
    attached = list(attached_instances)
    all_off = all(other['power_state'] != states.POWER_RUNNING
                  for other in attached)
    if (len(attachments) > 1
            and any(a['attach_mode'] == 'rw' for a in attachments)):
        if not all_off:
            raise exception.MultiattachMigrationNotSupported(
                volume_id=volume['id'], count=len(attachments))
        return states.MODE_OFFLINE
    if instance['power_state'] != states.POWER_RUNNING:
        return states.MODE_OFFLINE
    if capabilities.get('live_volume_migration'):
        return states.MODE_LIVE
    raise exception.InstanceMustBeShutOff(host=instance['host'],
                                          instance_uuid=instance['uuid'])


def check_can_swap(old_volume: dict, new_volume: dict,
                   migrations_in_progress: Iterable[dict]) -> None:
    """The legacy swap of ``old_volume`` for ``new_volume`` on one server.

    A swap switches one server only, so an old volume that other servers
    may write to cannot be swapped; migrating it switches them all.
    """
    if new_volume['id'] == old_volume['id']:
        raise exception.Invalid(reason='the new volume is the old volume')
    attachments = old_volume['attachments']
    if (len(attachments) > 1
            and any(a['attach_mode'] == 'rw' for a in attachments)):
        raise exception.MultiattachSwapNotSupported(
            volume_id=old_volume['id'], count=len(attachments))
    for migration in migrations_in_progress:
        raise exception.MigrationInProgress(
            what='volume %s' % migration['volume_id'],
            reason='migration %s is %s' % (migration['id'],
                                           migration['status']))
    if new_volume['size_mb'] != old_volume['size_mb']:
        raise exception.Invalid(
            reason='volume %s has %d MiB, volume %s has %d MiB; a swap '
                   'needs volumes of the same size' % (
                       new_volume['id'], new_volume['size_mb'],
                       old_volume['id'], old_volume['size_mb']))


def _must_take(migration: dict, action: str, status: str,
               taken: Iterable[str]) -> bool:
    """True when ``action`` must be taken; False when it was (the
    migration is in ``taken``); refused in any status but ``status``."""
    if migration['status'] in taken:
        return False
    if migration['status'] != status:
        raise exception.InvalidMigrationState(
            action=action, migration_id=migration['id'],
            status=migration['status'])
    return True


def check_can_cancel(migration: dict) -> bool:
    """True when a cancel must be sent; False when already cancelling."""
    return _must_take(migration, 'cancel', states.STARTED,
                      (states.CANCELLING, states.CANCELLED))


def check_can_switch(migration: dict) -> bool:
    """True when an agent's switch must be recorded; False when it was.

    A switch reported after the migration failed (the stall timeout) is
    refused: its recovery says where the guest is.
    """
    return _must_take(migration, 'record the switch', states.COMPLETING,
                      states.COMPLETE_REQUESTED - {states.COMPLETING})


def check_can_complete(migration: dict, dst_attachment_id: str) -> bool:
    """True when a complete must be sent; False when it was already.

    A repeated complete must name the same dst as the first one.
    """
    if (migration['status'] in states.COMPLETE_REQUESTED
            and migration['dst_attachment_id'] == dst_attachment_id):
        return False
    if migration['status'] != states.STARTED:
        raise exception.InvalidMigrationState(
            action='complete', migration_id=migration['id'],
            status=migration['status'])
    return True


def check_dst_attachment(migration: dict, dst_attachment: dict) -> None:
    """dst must be a different attachment for the same instance."""
    if dst_attachment['id'] == migration['src_attachment_id']:
        raise exception.Invalid(
            reason='the destination attachment is the source attachment')
    if dst_attachment['instance_uuid'] != migration['instance_uuid']:
        raise exception.Invalid(
            reason='attachment %s belongs to server %s, not to %s' % (
                dst_attachment['id'], dst_attachment['instance_uuid'],
                migration['instance_uuid']))


def dst_connected(dst_attachment: dict) -> bool:
    """Whether block storage connected dst for the guest's host already.

    volmig's manager in cinder-volume does so while Cinder copies, with
    the connector of the source attachment (the one volmig gave it), so
    that the complete does not wait on the driver's initialize_connection
    (0.2 s of a 0.5 s complete on Cinder's NFS driver). Others hand over
    a reserved attachment, which the conductor connects.
    """
    return (dst_attachment['attach_status'] == states.ATTACH_ATTACHING
            and bool(dst_attachment['connection_info']))


def check_dst_volume(migration: dict, src_volume: dict,
                     dst_volume: dict) -> None:
    """dst must be a volume of exactly src's size."""
    if dst_volume['size_mb'] != src_volume['size_mb']:
        raise exception.DestinationMismatch(
            what='volume %s' % dst_volume['id'],
            migration_id=migration['id'],
            reason='it has %d MiB, src volume %s has %d MiB' % (
                dst_volume['size_mb'], src_volume['id'],
                src_volume['size_mb']))

"""Which path each volume of a Cinder backend takes out of it, when
Nova's servers use the backend.

- ``swap``: attached to one running (or paused) Nova server. Cinder's
  migration, which asks Nova to swap the guest's disk (a block copy, then
  a pivot): the only live path Nova allows.
- ``offline``: attached to stopped Nova servers only. Held (locked) so
  that nobody starts them, the data moved by Cinder while nothing runs,
  then each server's record rewritten by ``nova-manage volume_attachment
  refresh``: the next start boots the new copy. Root volumes too, which
  Nova never detaches.
- ``copy``: attached to nothing. Cinder's own migration.
- ``none``: it cannot move safely; the reason says why.

What is refused, and why:

- several attachments where any is read/write: Nova's swap refuses two
  writers, and a refresh cannot order two guests' writes;
- several read-only attachments while any server runs: Cinder sends one
  swap per attachment and completes the migration on the first, so the
  other guests would go on reading the old backend. Measured on Nova 34
  with two running servers, it does not get that far: Nova answers
  Cinder's first swap with HTTP 500 (``InvalidInput``), and Cinder ends
  the migration in ``error`` with the volume where it was. Stopped, the
  servers take ``offline``;
- an attachment of a server that Nova does not know: a guest of volmig's
  own, which neither Nova's swap nor a refresh would move (volmig's
  live path cannot move Nova's guest either), or one nobody accounts
  for;
- a volume migrating already, or a server in a state of its own (building,
  resizing, in error).
"""

from volmig.nova import compute

SWAP, OFFLINE, COPY, NONE = 'swap', 'offline', 'copy', 'none'
# Cinder's migration_status while a migration is under way.
UNDER_WAY = ('starting', 'migrating', 'completing')


def classify(volume: dict, servers: dict[str, dict | None],
             own_guests: frozenset = frozenset()) -> tuple[str, str]:
    """(path, reason) of a volume, given Nova's servers by id (None where
    Nova has no such server) and the ids of volmig's own guests."""
    if volume.get('migration_status') in UNDER_WAY:
        return NONE, 'Cinder is migrating it already'
    attachments = volume['attachments']
    if not attachments:
        return COPY, "attached to nothing: Cinder's own migration"
    for attachment in attachments:
        server_id = attachment['instance_uuid']
        if servers.get(server_id) is not None:
            continue
        if server_id in own_guests:
            return NONE, ("attached to volmig's guest %s as well as to "
                          "Nova's servers: no one path moves both"
                          % server_id if len(attachments) > 1 else
                          "attached to volmig's guest %s: use volmig's own "
                          'migration' % server_id)
        return NONE, ('attached to %s, which is no server of Nova nor a '
                      'guest of volmig' % server_id)
    # Every one is Nova's, checked above.
    states: dict[str, dict] = {a['instance_uuid']: servers[a['instance_uuid']]
                               or {} for a in attachments}
    for server_id, server in sorted(states.items()):
        if server.get('OS-EXT-STS:task_state') or server['status'] not in (
                compute.RUNNING + (compute.STOPPED,)):
            return NONE, ('server %s is %s%s: neither Nova\'s swap nor a '
                          'refresh takes it' % (
                              server_id, server['status'],
                              ' (%s)' % server['OS-EXT-STS:task_state']
                              if server.get('OS-EXT-STS:task_state')
                              else ''))
    stopped = sorted(s for s, server in states.items()
                     if server['status'] == compute.STOPPED)
    if len(attachments) > 1:
        if any(a['attach_mode'] != 'ro' for a in attachments):
            return NONE, ('attached to %d servers, read/write: Nova\'s swap '
                          'refuses it, and moving it under several writers '
                          'is not safe' % len(attachments))
        if len(stopped) < len(attachments):
            return NONE, ('attached read-only to %d servers, %d running: '
                          "Nova's swap fails on a volume shared so, and "
                          "Cinder would leave all but the first server on "
                          'this backend; stop them all and it moves offline'
                          % (len(attachments),
                             len(attachments) - len(stopped)))
        return OFFLINE, ('attached read-only to %d stopped servers: moved '
                         'while they are held, their records refreshed'
                         % len(attachments))
    [server_id] = states
    if stopped:
        return OFFLINE, ('attached to stopped server %s: moved while it is '
                         'held, its record refreshed' % server_id)
    return SWAP, ("attached to running server %s: Cinder's migration "
                  "through Nova's swap" % server_id)

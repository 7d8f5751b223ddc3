"""A pool's drain, as notifications tell it, whichever service runs it
(volmig-volume for its own pools, the conductor for Cinder's)."""

from volmig import notifications


def _counts(entries: list[dict]) -> dict[str, int]:
    """A drain's volumes, counted by state."""
    found: dict[str, int] = {}
    for entry in entries:
        found[entry['state']] = found.get(entry['state'], 0) + 1
    return found


class Announcer:
    """A drain's notifications, from the service on ``host`` that runs
    it: ``volume_pool.drain.start`` and ``.end``, and ``.volume`` for
    each volume as planned and each time a pass changed its state."""

    def __init__(self, publisher: str, host: str):
        self.notifier = notifications.Notifier('%s:%s' % (publisher, host))
        self.host = host

    def drain(self, ctxt, drain: dict, phase: str) -> None:
        self.notifier.notify(ctxt, notifications.DRAIN, phase, {
            'id': drain['id'], 'host': self.host, 'pool': drain['pool'],
            'target_pool': drain['target_pool'], 'status': drain['status'],
            'max_parallel': drain['max_parallel'],
            'volumes': _counts(drain['volumes'])})

    def volumes(self, ctxt, drain: dict, before: list[dict],
                servers: dict[str, list[str]]) -> None:
        """Each volume of the plan (``before`` empty) or whose state a
        pass changed, with the servers ``servers`` names by volume id."""
        was = {entry['volume_id']: entry['state'] for entry in before}
        for entry in drain['volumes']:
            if entry['state'] == was.get(entry['volume_id']):
                continue
            self.notifier.notify(ctxt, notifications.DRAIN, 'volume', {
                'drain_id': drain['id'], 'host': self.host,
                'pool': drain['pool'], 'target_pool': drain['target_pool'],
                'volume_id': entry['volume_id'], 'action': entry['action'],
                'state': entry['state'],
                'old_state': was.get(entry['volume_id']),
                'reason': entry['reason'],
                'instance_uuids': sorted(servers.get(entry['volume_id'],
                                                     ()))})

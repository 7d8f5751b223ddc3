"""The job journal: what the agent is about to do to a guest's disk.

One JSON file per migration, rewritten and fsynced before each step it
asks of QEMU or libvirt, so an agent that restarts knows which step it
was in and can compare it with what the hypervisor reports
(doc/source/design.rst, "State and recovery").
"""

import json
import os

from oslo_log import log as logging

from volmig import atomic_file

LOG = logging.getLogger(__name__)


def swap_key(new_bdm: dict) -> str:
    """The journal's name for a swap: it has no migration of its own."""
    return 'swap-%s' % new_bdm['attachment_id']


class Journal:

    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, migration_id: str) -> str:
        return os.path.join(self.directory, migration_id + '.json')

    def record(self, migration_id: str, step: str, **details) -> dict:
        """Persist the step about to be taken, with what it needs."""
        entry = self.get(migration_id) or {'migration_id': migration_id}
        entry.update(details, step=step)
        atomic_file.write_json(self._path(migration_id), entry)
        return entry

    def get(self, migration_id: str) -> dict | None:
        try:
            with open(self._path(migration_id)) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def announce(self, migration_id: str) -> dict | None:
        """Log the step a migration's journal was left at, for recovery;
        returns its entry."""
        entry = self.get(migration_id)
        if entry:
            LOG.info('Volume migration %(id)s: the journal says step '
                     '%(step)s of %(action)s', {
                         'id': migration_id, 'step': entry['step'],
                         'action': entry.get('action')})
        return entry

    def close(self, migration_id: str) -> None:
        """The job is over; nothing is left to reconcile."""
        try:
            os.unlink(self._path(migration_id))
        except FileNotFoundError:
            pass

    def open_entries(self) -> list[dict]:
        entries = []
        for name in sorted(os.listdir(self.directory)):
            if name.endswith('.json'):
                entry = self.get(name[:-len('.json')])
                if entry:
                    entries.append(entry)
        return entries

    def swaps(self) -> list[dict]:
        """The legacy swaps left under way."""
        return [entry for entry in self.open_entries()
                if entry.get('action') == 'swap']

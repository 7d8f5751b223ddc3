"""volmig-compute that SIGKILLs itself, or its guest's QEMU, as its
journal records a step.

    python -m tests.integration.crash_at [--qemu] ACTION:STEP [...]

The agent dies with the step's intent on disk and the step not taken,
which is also the moment right after the step before it; recovery tests
then start the real agent again. With ``--qemu`` the guest's QEMU dies
instead, and the agent carries on into a step that fails.
"""

import os
import signal
import sys
import time


def _kill_qemu(jobs_dir: str, instance_uuid: str) -> None:
    guest_dir = os.path.join(os.path.dirname(jobs_dir), 'guests',
                             instance_uuid)
    with open(os.path.join(guest_dir, 'qemu.pid')) as pid_file:
        pid = int(pid_file.read())
    os.kill(pid, signal.SIGKILL)
    # Gone, or a zombie: QEMU is a child of this agent, which reaps it
    # only when it next looks at the guest.
    while _alive(pid):
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().rpartition(')')[2].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def main() -> None:
    kill_qemu = sys.argv[1] == '--qemu'
    if kill_qemu:
        sys.argv.pop(1)
    wanted = sys.argv.pop(1)
    # Imported only now: volmig.cmd reads the backend from sys.argv.
    from volmig.cmd import compute
    from volmig.compute.drivers.qemu import journal

    record = journal.Journal.record

    def record_then_die(self, migration_id, step, **details):
        entry = record(self, migration_id, step, **details)
        if '%s:%s' % (entry.get('action'), step) != wanted:
            return entry
        if kill_qemu:
            _kill_qemu(self.directory, entry['instance_uuid'])
            return entry
        os.kill(os.getpid(), signal.SIGKILL)
        return entry

    journal.Journal.record = record_then_die  # type: ignore[method-assign]
    compute.main()


if __name__ == '__main__':
    main()

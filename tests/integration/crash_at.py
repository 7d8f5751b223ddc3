"""volmig-compute that SIGKILLs itself, its guest's QEMU, or libvirtd,
as its journal records a step.

    python -m tests.integration.crash_at \
        [--qemu|--libvirtd|--process=PIDFILE] ACTION:STEP [...]

The agent dies with the step's intent on disk and the step not taken,
which is also the moment right after the step before it; recovery tests
then start the real agent again. With ``--qemu`` the guest's QEMU dies
instead, and the agent carries on into a step that fails; with
``--libvirtd`` libvirtd dies, and the agent carries on into a step that
finds no daemon until the test starts it again. With ``--process``
the process whose pid is in PIDFILE when the step comes dies (the
conductor, or a RabbitMQ node), and the agent carries on into reports
that nobody answers until the test starts it again.
"""

import os
import signal
import sys
import time

from tests import libvirt_daemon


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
    victim, _, pid_file = 'agent', '', ''
    if sys.argv[1].startswith(('--qemu', '--libvirtd', '--process')):
        victim, _, pid_file = sys.argv.pop(1)[2:].partition('=')
    wanted = sys.argv.pop(1)
    # Imported only now: volmig.cmd reads the backend from sys.argv.
    from volmig.cmd import compute
    from volmig.compute.drivers import journal

    record = journal.Journal.record

    fired = []

    def record_then_die(self, migration_id, step, **details):
        entry = record(self, migration_id, step, **details)
        # Once: a step taken again after the fault (a pivot asked again
        # of a new libvirtd) must not bring the fault back.
        if '%s:%s' % (entry.get('action'), step) != wanted or fired:
            return entry
        fired.append(step)
        if victim == 'qemu':
            _kill_qemu(self.directory, entry['instance_uuid'])
            return entry
        if victim == 'libvirtd':
            libvirt_daemon.kill()
            return entry
        if victim == 'process':
            with open(pid_file) as pids:
                os.kill(int(pids.read()), signal.SIGKILL)
            return entry
        os.kill(os.getpid(), signal.SIGKILL)
        return entry

    journal.Journal.record = record_then_die  # type: ignore[method-assign]
    compute.main()


if __name__ == '__main__':
    main()

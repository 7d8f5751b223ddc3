"""volmig-compute that SIGKILLs itself as its journal records a step.

    python -m volmig.tests.integration.crash_at ACTION:STEP [options]

The agent dies with the step's intent on disk and the step not taken,
which is also the moment right after the step before it. Recovery tests
run it, then start the real agent again.
"""

import os
import signal
import sys


def main() -> None:
    wanted = sys.argv.pop(1)
    # Imported only now: volmig.cmd reads the backend from sys.argv.
    from volmig.cmd import compute
    from volmig.compute.drivers.qemu import journal

    record = journal.Journal.record

    def record_then_die(self, migration_id, step, **details):
        entry = record(self, migration_id, step, **details)
        if '%s:%s' % (entry.get('action'), step) == wanted:
            os.kill(os.getpid(), signal.SIGKILL)
        return entry

    journal.Journal.record = record_then_die
    compute.main()


if __name__ == '__main__':
    main()

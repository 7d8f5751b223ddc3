"""A volmig service whose stop fails, as a bug in a stop would:

    python -m tests.failing_stop volmig-conductor <its arguments>
"""

import importlib
import sys


def main() -> None:
    binary = sys.argv[1]
    # volmig.cmd chooses the concurrency backend from the arguments when
    # it is imported.
    sys.argv = [binary] + sys.argv[2:]
    command = importlib.import_module(
        'volmig.cmd.%s' % binary.split('-', 1)[1])
    from volmig import service

    def stop(self, graceful=False):
        raise RuntimeError('injected failure while stopping')

    service.Service.stop = stop
    command.main()


if __name__ == '__main__':
    main()

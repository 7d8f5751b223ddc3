"""Service entry points.

The concurrency backend must be chosen before oslo.messaging, futurist or
the database layer are imported, so it happens here, on import of the
package that every console script lives in. So does the umask: whatever a
service creates (volume files, guests' logs and sockets, state) is never
readable by other users, whoever started it.
"""

import os
import sys

from volmig import concurrency

UMASK = 0o027

os.umask(UMASK)
concurrency.select_backend(sys.argv[1:])

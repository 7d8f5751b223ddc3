"""Service entry points.

The concurrency backend must be chosen before oslo.messaging, futurist or
the database layer are imported, so it happens here, on import of the
package that every console script lives in.
"""

import sys

from volmig import concurrency

concurrency.select_backend(sys.argv[1:])

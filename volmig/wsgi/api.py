"""``volmig.wsgi.api:application``, the REST API for a WSGI server.

Configuration files come from ``VOLMIG_CONFIG_FILES`` (comma-separated),
``/etc/volmig/volmig.conf`` by default. The WSGI server owns the request
threads, so this always uses the threading backend.
"""

import os

from volmig import concurrency
from volmig import config
from volmig import rpc
from volmig import signing
from volmig.api.rest import app


def init_application():
    concurrency.init_threading()
    files = os.environ.get('VOLMIG_CONFIG_FILES', '/etc/volmig/volmig.conf')
    config.parse_args([], default_config_files=[
        path for path in files.split(',') if os.path.exists(path)])
    rpc.init(identity=(signing.CONTROLLER,), process='volmig-api')
    return app.build()


application = init_application()

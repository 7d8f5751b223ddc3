"""volmig-compute: the agent that drives the guests on one host."""

import sys

from oslo_log import log as logging

from volmig import config
from volmig import exception
from volmig import service

LOG = logging.getLogger(__name__)


def main() -> None:
    config.parse_args(sys.argv[1:])
    try:
        agent = service.Service(service.COMPUTE)
    except exception.ConfigurationError as exc:
        refusal = 'volmig-compute refuses to start: %s' % exc
    else:
        service.serve(agent)
        return
    LOG.error(refusal)
    sys.exit(refusal)

"""Who runs a step: a service, and the generation of its process.

A step that one service drives while others may look at it (a start that
volmig-api has sent to an agent and waits on) is recorded with its owner.
Whoever finds the step unfinished asks whether that owner still runs: its
service record is up and names the same generation. A restarted service
has a new generation, so what its last process left unfinished is seen at
once as nobody's, with no timer guessing.
"""

from oslo_utils import uuidutils

# One per process: every service of this process shares its fate.
GENERATION = uuidutils.generate_uuid()

# The key of the generation in a service record's capabilities.
CAPABILITY = 'generation'


def identity(binary: str, host: str) -> str:
    """This process's owner string for ``binary`` on ``host``."""
    return '%s:%s:%s' % (binary, host, GENERATION)


def parse(owner: str) -> tuple[str, str, str]:
    """``(binary, host, generation)`` of an owner string."""
    binary, rest = owner.split(':', 1)
    host, generation = rest.rsplit(':', 1)
    return binary, host, generation

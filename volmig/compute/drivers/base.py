"""The interface between the compute agent and a hypervisor.

Instances and block device mappings are passed as the dicts the conductor
records. Methods that run long return a ``Job`` the agent polls.
"""

import abc
from collections.abc import Callable
from collections.abc import Mapping
import dataclasses
import types

# Capability names (doc/source/design.rst, "Compute drivers").
LIVE_VOLUME_MIGRATION = 'live_volume_migration'
MULTIATTACH = 'multiattach'
READONLY_ATTACH = 'readonly_attach'


@dataclasses.dataclass(frozen=True)
class JobProgress:
    bytes_done: int
    bytes_total: int
    finished: bool


class Job(abc.ABC):
    """A long driver operation, such as a block-commit."""

    # Guest I/O pauses of its steps, {step: milliseconds}, once known.
    pauses: Mapping[str, float] = types.MappingProxyType({})

    @abc.abstractmethod
    def poll(self) -> JobProgress:
        """Advance or inspect the job; never blocks for long."""


class FinishedJob(Job):
    """A job with nothing to do, for drivers without a data path."""

    def poll(self) -> JobProgress:
        return JobProgress(0, 0, True)


class ComputeDriver(abc.ABC):

    # Called with an instance uuid when its guest powered off by itself,
    # for drivers that see it happen; the agent's periodic sync covers
    # the rest.
    power_listener: Callable[[str], None] | None = None

    def __init__(self, conf):
        self.conf = conf

    @property
    @abc.abstractmethod
    def capabilities(self) -> dict:
        """The capability flags, reported in the service record."""

    def init_host(self, host: str) -> None:  # noqa: B027 -- optional hook
        """Find the guests that outlived a restart of the agent."""

    def cleanup_host(self) -> None:  # noqa: B027 -- optional hook
        """Release what the driver holds; guests keep running."""

    def stop_guests(self) -> None:  # noqa: B027 -- optional hook
        """Shut every guest off (the embedded default exits with them)."""

    def swaps_to_recover(self) -> list[dict]:
        """Swaps a previous agent left under way: ``{instance_uuid,
        old_bdm, new_bdm}`` each. Drivers without a journal have none."""
        return []

    def swap_recover(self, entry: dict) -> 'Job':
        """A job that finishes one of them; raises if it failed."""
        raise NotImplementedError()

    @abc.abstractmethod
    def spawn(self, instance: dict, block_devices: list[dict]) -> None:
        """Create and start a guest with its volumes."""

    @abc.abstractmethod
    def destroy(self, instance: dict) -> None:
        """Stop and remove a guest."""

    @abc.abstractmethod
    def power_off(self, instance: dict) -> None:
        """Shut the guest off."""

    @abc.abstractmethod
    def power_on(self, instance: dict, block_devices: list[dict]) -> None:
        """Start a shut-off guest on its current volumes."""

    @abc.abstractmethod
    def get_power_state(self, instance: dict) -> str:
        """One of the POWER_* states."""

    def get_console_output(self, instance: dict,
                           length: int | None) -> str:
        """The last ``length`` lines of the guest's serial console."""
        return ''

    @abc.abstractmethod
    def attach_volume(self, instance: dict, bdm: dict) -> None:
        """Attach a volume, read-only when bdm's attach_mode is "ro"."""

    @abc.abstractmethod
    def detach_volume(self, instance: dict, bdm: dict) -> None:
        """Detach a volume."""

    @abc.abstractmethod
    def swap_volume(self, instance: dict, old_bdm: dict,
                    new_bdm: dict) -> Job:
        """The legacy swap: copy old into new, then switch the guest.

        The job's end is the switch; until then the guest is on old, and a
        failed job leaves it there.
        """

    @abc.abstractmethod
    def migration_start(self, instance: dict, bdm: dict,
                        migration: dict) -> dict:
        """Stop all writes to the source.

        Live: guest writes go to a host-local overlay from now on.
        Offline: the guest is shut off; it is only locked.
        Returns the guest I/O pauses of the steps, {step: milliseconds}.
        """

    @abc.abstractmethod
    def migration_cancel(self, instance: dict, bdm: dict,
                         migration: dict) -> Job:
        """Send guest writes back to src; the job merges the overlay."""

    @abc.abstractmethod
    def migration_switch(self, instance: dict, bdm: dict, migration: dict,
                         dst_connection_info: dict) -> dict:
        """Put the guest on dst; when it returns src is released.

        A dst that does not fit is refused before anything switches.
        Returns the guest I/O pauses of the steps, {step: milliseconds}.
        """

    @abc.abstractmethod
    def migration_commit(self, instance: dict, bdm: dict,
                         migration: dict) -> Job:
        """Merge the overlay into dst, then drop it."""

    @abc.abstractmethod
    def migration_recover(self, instance: dict, bdm: dict, migration: dict,
                          dst_connection_info: dict | None) -> str:
        """After an agent crash: align the driver's record with the guest.

        Every migration method is then safe to call again. Returns the
        side the guest is on, "src" or "dst".
        """

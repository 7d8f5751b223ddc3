"""Soak: randomized migrations under guest writes, with random kills.

Separate volmig-conductor, volmig-api, volmig-volume and volmig-compute
(qemu driver) processes on a RabbitMQ vhost of their own. Each round
boots a guest from a new volume, keeps it writing 64 KiB blocks through
its disk's NBD export, and runs one operation, chosen at random:

* complete: volmig-volume migrates the volume to the other pool (start,
  copy, verify, complete);
* cancel: start, then cancel, as a block-storage service gives up;
* swap: the legacy swap into a new volume.

At a random moment during it, a random service (or none) is SIGKILLed
and started again. When the round ends, it checks the file the server's
mapping points at against every write the guest made, byte for byte,
and that no server, volume or migration is left in a transitional
state. It prints the lost bytes, what was stuck, and how long each
recovery took. The goal is 0 lost and 0 stuck.
"""

# The backend must be chosen before oslo.messaging is imported.
from volmig import concurrency  # noqa: I001

concurrency.init_threading()

import argparse  # noqa: E402
import collections  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import oslo_messaging as messaging  # noqa: E402

from tests import nbd_writer as guest_io  # noqa: E402
from tests.integration import cluster  # noqa: E402
from volmig import block_storage  # noqa: E402
from volmig import client  # noqa: E402
from volmig import context as volmig_context  # noqa: E402
from volmig import exception  # noqa: E402
from volmig import states  # noqa: E402
from volmig.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from volmig.conf import CONF  # noqa: E402

MIB = 1024 * 1024
SIZE_MB = 16
OPERATIONS = ('complete', 'cancel', 'swap')
VICTIMS = (None, 'compute-1', 'conductor', 'volume', 'api')
# A round that has not ended by then is stuck.
ROUND_TIMEOUT = 180


class Soak:

    def __init__(self, services: cluster.Cluster, seed: int):
        self.services = services
        self.random = random.Random(seed)
        self.admin = volmig_context.get_admin_context()
        self.service_ctxt = volmig_context.get_service_context()
        self.conductor = conductor_rpcapi.ConductorAPI(timeout=15)
        self.client = client.MigrationClient(timeout=15)
        self.volumes = block_storage.get_adapter()
        self.rounds: list[dict] = []

    def retry(self, call, *args, **kwargs):
        """A call, retried while a killed service comes back; a typed
        refusal is an answer, and is raised."""
        deadline = time.monotonic() + ROUND_TIMEOUT
        while True:
            try:
                return call(*args, **kwargs)
            except messaging.MessagingTimeout:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def wait(self, predicate) -> bool:
        deadline = time.monotonic() + ROUND_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return True
            except Exception:  # nosec B110 - a service is restarting
                pass
            time.sleep(0.2)
        return False

    def boot(self):
        vol = self.retry(self.volumes.create_volume, self.admin, SIZE_MB,
                         pool='pool-a')
        [server] = self.retry(self.conductor.build_instances, self.admin,
                              'soak', [{'volume_id': vol['id'],
                                        'boot_index': 0}], 1, None)
        self.wait(lambda: self.conductor.instance_get(
            self.admin, server['uuid'])['vm_state'] == states.VM_ACTIVE)
        return server, vol

    def run_round(self, number: int) -> None:
        operation = self.random.choice(OPERATIONS)
        victim = self.random.choice(VICTIMS)
        delay = self.random.uniform(0, 1.5)
        self.services.wait_until_registered(timeout=120)
        server, vol = self.boot()
        writer = guest_io.GuestWriter(
            guest_io.nbd_socket(os.path.join(CONF.state_path, 'compute'),
                                server['uuid']), vol['id'])
        load = guest_io.WriteLoad(writer, SIZE_MB * MIB)
        load.start()
        time.sleep(0.3)
        began = time.monotonic()
        try:
            ended = getattr(self, 'begin_' + operation)(server, vol)
        except exception.VolmigException as exc:
            print('round %3d: %s refused: %s' % (number, operation,
                                                exc.message))
            ended = bool
        time.sleep(delay)
        killed_at = None
        if victim:
            killed_at = time.monotonic()
            self.services.restart(victim, sig=signal.SIGKILL)
        settled = self.wait(ended) and self.wait(
            lambda: self.idle(server, vol))
        finished = time.monotonic()
        time.sleep(0.3)
        load.stop()
        writer.close()
        lost = self.lost_bytes(server, writer)
        self.rounds.append({
            'operation': operation, 'victim': victim or '-',
            'lost': lost, 'stuck': not settled,
            'write_error': str(load.error or ''),
            'seconds': finished - began,
            'recovery': finished - killed_at if killed_at else None})
        print('round %3d: %-8s kill %-9s after %.2f s: %s, lost %d bytes, '
              '%.1f s' % (number, operation, victim or '-', delay,
                          'STUCK' if not settled else 'settled', lost,
                          finished - began), flush=True)
        self.retry(self.conductor.delete_instance, self.admin,
                   server['uuid'])

    # Each operation begins, and returns what says it has ended.

    def begin_complete(self, server, vol):
        self.retry(self.volumes.migrate_volume, self.admin, vol['id'],
                   'pool-b', 8)
        return lambda: self.volumes.get_volume(
            self.admin, vol['id'])['migration_status'] in ('success',
                                                           'error')

    def begin_cancel(self, server, vol):
        bdm = server['block_devices'][0]
        migration = self.retry(self.client.start, self.service_ctxt,
                               bdm['attachment_id'])
        time.sleep(self.random.uniform(0, 1))
        try:
            self.client.cancel(self.service_ctxt, bdm['attachment_id'])
        except Exception:  # nosec B110 - the healer ends it instead
            pass
        return lambda: self.client.get(
            self.service_ctxt, migration['id'])['status'] in states.TERMINAL

    def begin_swap(self, server, vol):
        new = self.retry(self.volumes.create_volume, self.admin, SIZE_MB,
                         pool='pool-b')
        self.retry(self.conductor.swap_volume, self.admin, server['uuid'],
                   vol['id'], new['id'])
        return lambda: self.conductor.instance_get(
            self.admin, server['uuid'])['task_state'] is None

    def idle(self, server, vol) -> bool:
        """Nothing about the round is in a transitional state."""
        instance = self.conductor.instance_get(self.admin, server['uuid'])
        migrations = self.client.list(self.service_ctxt,
                                      instance_uuid=server['uuid'])
        volume_status = self.volumes.get_volume(
            self.admin, vol['id']).get('migration_status')
        return (instance['task_state'] is None
                and all(m['status'] in states.TERMINAL
                        and not m['recovery_needed'] for m in migrations)
                and volume_status not in ('starting', 'migrating'))

    def lost_bytes(self, server, writer) -> int:
        """Bytes of the server's volume that differ from its writes."""
        instance = self.retry(self.conductor.instance_get, self.admin,
                              server['uuid'])
        path = instance['block_devices'][0]['connection_info']['data'][
            'path']
        expected = writer.expected_image(bytes(SIZE_MB * MIB))
        with open(path, 'rb') as handle:
            actual = handle.read()
        return sum(a != b for a, b in zip(expected, actual, strict=True))

    def report(self) -> None:
        rounds = self.rounds
        print('\n%d rounds: %s' % (len(rounds), dict(collections.Counter(
            r['operation'] for r in rounds))))
        print('kills: %s' % dict(collections.Counter(
            r['victim'] for r in rounds)))
        print('lost bytes: %d' % sum(r['lost'] for r in rounds))
        print('stuck rounds: %d' % sum(r['stuck'] for r in rounds))
        print('guest write errors: %d' % sum(bool(r['write_error'])
                                             for r in rounds))
        recoveries = sorted(r['recovery'] for r in rounds
                            if r['recovery'] is not None)
        if recoveries:
            print('recovery after a kill (kill -> settled): p50 %.1f s, '
                  'max %.1f s over %d kills' % (
                      statistics.median(recoveries), recoveries[-1],
                      len(recoveries)))
        by_victim = collections.defaultdict(list)
        for r in rounds:
            if r['recovery'] is not None:
                by_victim[r['victim']].append(r['recovery'])
        for victim, times in sorted(by_victim.items()):
            print('  %-9s p50 %.1f s, max %.1f s (%d)' % (
                victim, statistics.median(times), max(times), len(times)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=50)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()

    with cluster.qemu_cluster({
            ('DEFAULT', 'report_interval'): 1,
            ('DEFAULT', 'service_down_time'): 10,
            ('DEFAULT', 'rpc_response_timeout'): 15,
            ('conductor', 'heal_interval'): 1,
            ('conductor', 'migration_stall_timeout'): 10,
            ('conductor', 'task_timeout'): 20,
            ('compute', 'job_poll_interval'): 0.1}) as (services, _):
        soak = Soak(services, args.seed)
        try:
            for number in range(1, args.rounds + 1):
                soak.run_round(number)
        finally:
            soak.report()

if __name__ == '__main__':
    main()

"""volmig-demo: one volume migration on the embedded default.

It runs the services in this process, then plays the block-storage
service: it boots a server from a volume, starts a migration, makes a
destination attachment, completes, and shows where the guest ended up.
"""

import sys
import time

from oslo_config import cfg

from volmig import client
from volmig import config
from volmig import context as volmig_context
from volmig import embedded
from volmig import states
from volmig import volume
from volmig.conductor import rpcapi as conductor_rpcapi
from volmig.conf import CONF

cli_opts = [
    cfg.StrOpt('state-dir', required=True,
               help='Directory for the database and all other state.'),
    cfg.StrOpt('driver', default='fake', choices=['fake'],
               help='Compute driver of the agent.'),
]


def _wait_active(conductor, ctxt, instance_uuid, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server = conductor.instance_get(ctxt, instance_uuid)
        if server['vm_state'] == states.VM_ACTIVE:
            return server
        time.sleep(0.1)
    raise RuntimeError('server %s did not become active' % instance_uuid)


def run_demo() -> dict:
    admin = volmig_context.get_admin_context()
    storage = volmig_context.get_service_context()
    user = volmig_context.RequestContext(user_id='demo', project_id='demo',
                                         roles=['member'])
    volumes = volume.get_adapter()
    conductor = conductor_rpcapi.ConductorAPI()
    migrations = client.MigrationClient()

    src = volumes.create_volume(admin, 64, name='data')
    [server] = conductor.build_instances(
        user, 'demo-vm', [{'volume_id': src['id'], 'boot_index': 0}], 1,
        None)
    server = _wait_active(conductor, admin, server['uuid'])
    bdm = server['block_devices'][0]
    print('server %s is active on %s with volume %s (attachment %s)'
          % (server['uuid'], server['host'], src['id'],
             bdm['attachment_id']))

    migration = migrations.start(storage, bdm['attachment_id'])
    print('start:    migration %s is %s (%s); src gets no more writes'
          % (migration['id'], migration['status'], migration['mode']))

    dst = volumes.create_volume(admin, 64, name='data-copy')
    dst_attachment = volumes.attachment_create(admin, dst['id'],
                                               server['uuid'],
                                               bdm['attach_mode'])
    released = migrations.complete(storage, bdm['attachment_id'],
                                   dst_attachment['id'])
    print('complete: migration is %s; src may be removed'
          % released['status'])
    done = migrations.wait_for(storage, migration['id'], states.COMPLETED)
    print('done:     migration is %s' % done['status'])

    server = conductor.instance_get(admin, server['uuid'])
    after = server['block_devices'][0]
    print('server %s now uses attachment %s (volume id %s, mode %s)'
          % (server['uuid'], after['attachment_id'], after['volume_id'],
             after['attach_mode']))
    return done


def main() -> None:
    CONF.register_cli_opts(cli_opts)
    config.parse_args(sys.argv[1:])
    embedded.configure(CONF.state_dir, CONF.driver, 'fake://')
    group = embedded.build(computes=1)
    group.start()
    try:
        done = run_demo()
    finally:
        group.stop()
    sys.exit(0 if done['status'] == states.COMPLETED else 1)

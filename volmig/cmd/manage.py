"""volmig-manage: operator commands.

``db sync|version``; ``image register|list|delete``, the guest images
of this compute host's ``[qemu] image_dir``; ``volume list`` and
``volume migrate VOLUME --to POOL [--max-bandwidth-mbps N] [--wait]``,
which ask volmig-volume over RPC; ``migration
list|show|recover|abort``, ``server reset-state`` and ``service
list|disable|enable|delete``, which ask the conductor. Each prints a
refusal's reason and exits 1.
"""

import logging as std_logging
import os
import re
import socket
import sys
import threading
import time

from oslo_config import cfg
from oslo_db import exception as db_exc
import oslo_messaging as messaging

from volmig import config
from volmig import context as volmig_context
from volmig import exception
from volmig import rpc
from volmig.cli import pools as pools_cli
from volmig.cmd import keys
from volmig.cmd import manage_parser
from volmig.compute.drivers import images
from volmig.conductor import operator_rpcapi
from volmig.conf import CONF
from volmig.db import schema as schema
from volmig.volume_service import rpcapi as storage_rpcapi


def _db_sync() -> None:
    schema.upgrade()
    print('Database is at revision %s' % schema.current_revision())


def _db_version() -> None:
    print(schema.current_revision() or 'empty')


def _images() -> images.ImageStore:
    return images.ImageStore(CONF.qemu.image_dir)


def _image_register() -> None:
    command = CONF.category
    image = _images().register(command.image, kernel=command.kernel,
                               initrd=command.initrd,
                               cmdline=command.cmdline or '',
                               disk=command.disk)
    print('image %s registered in %s' % (image['name'], CONF.qemu.image_dir))


def _image_list() -> None:
    for image in _images().list():
        kind = 'kernel' if image.get('kernel') else 'disk'
        print('%-24s %-6s %s' % (image['name'], kind, image['cmdline']))


def _image_delete() -> None:
    _images().delete(CONF.category.image)
    print('image %s deleted' % CONF.category.image)


def migration_of(vol: dict) -> str:
    """A volume's migration as ``volume list`` shows it."""
    if vol.get('migration_status') == 'error' and vol.get('migration_dst'):
        # Both volumes kept, a guest perhaps on dst: shown until its
        # guests' migrations settle it (volume_service.unfinished).
        return 'error, unsettled (dst %s kept): %s' % (
            vol['migration_dst'], vol['migration_error'])
    return vol.get('migration_status') or ''


def _volume_list() -> None:
    volumes = storage_rpcapi.StorageAPI()
    for vol in volumes.list_volumes(volmig_context.get_admin_context()):
        print('%s  %-7s %6d MiB  %-9s %s' % (
            vol['id'], vol['pool'], vol['size_mb'], vol['status'],
            migration_of(vol)))


def _volume_migrate() -> int:
    admin = volmig_context.get_admin_context()
    volumes = storage_rpcapi.StorageAPI()
    command = CONF.category
    vol = volumes.migrate_volume(admin, command.volume_id, command.to,
                                 command.max_bandwidth_mbps)
    print('volume %s: migrating to %s (migrations %s)'
          % (vol['id'], command.to, ', '.join(vol['migration_ids']) or
             'none: not attached'))
    while command.wait:
        vol = volumes.get_volume(admin, command.volume_id)
        print('  %s %5.1f%%' % (vol['migration_status'],
                                vol['migration_progress']), flush=True)
        if vol['migration_status'] == 'success':
            print('volume %s is in pool %s' % (vol['id'], vol['pool']))
            break
        if vol['migration_status'] == 'error':
            print('migration failed: %s' % vol['migration_error'])
            return 1
        time.sleep(1)
    return 0


def _print_drain(drain: dict) -> None:
    for entry in drain['volumes']:
        print('%s  %6d MiB  %-7s %-9s %s' % (
            entry['volume_id'], entry['size_mb'], entry['action'],
            entry['state'], entry['reason']))
    if not drain['dry_run']:
        print(pools_cli.summary_line(drain), flush=True)


def _pool_drain() -> int:
    admin = volmig_context.get_admin_context()
    volumes = storage_rpcapi.StorageAPI()
    command = CONF.category
    drain = volumes.drain_pool(admin, command.pool, command.to,
                               command.max_parallel,
                               command.max_bandwidth_mbps, command.dry_run)
    _print_drain(drain)
    while command.wait and drain['status'] == 'running':
        time.sleep(1)
        drain = volumes.pool_drain_get(admin, command.pool)
        print(pools_cli.summary_line(drain), flush=True)
    if command.wait:
        _print_drain(drain)
    return 0


def _pool_show() -> None:
    _print_drain(storage_rpcapi.StorageAPI().pool_drain_get(
        volmig_context.get_admin_context(), CONF.category.pool))


def _pool_cancel_drain() -> None:
    _print_drain(storage_rpcapi.StorageAPI().pool_drain_cancel(
        volmig_context.get_admin_context(), CONF.category.pool))


MIGRATION_FIELDS = ('id', 'status', 'mode', 'host', 'instance_uuid',
                    'volume_id', 'src_attachment_id', 'dst_attachment_id',
                    'bytes_done', 'bytes_total', 'error_phase',
                    'error_reason', 'recovery_needed', 'pauses_ms',
                    'created_at', 'updated_at')


def _conductor():
    return operator_rpcapi.OperatorAPI()


def _print_migration(migration: dict) -> None:
    for field in MIGRATION_FIELDS:
        print('%-18s %s' % (field, migration.get(field)))


def _migration_list() -> None:
    command = CONF.category
    filters = {key: value for key, value in (
        ('status', command.status), ('host', command.on_host)) if value}
    migrations = _conductor().migration_list(
        volmig_context.get_admin_context(), filters)
    for migration in migrations:
        print('%s  %-12s %-8s %-12s %s%s' % (
            migration['id'], migration['status'], migration['mode'],
            migration['host'], migration['volume_id'],
            '  RECOVERY NEEDED' if migration['recovery_needed'] else ''))


def _migration_show() -> None:
    _print_migration(_conductor().migration_get(
        volmig_context.get_admin_context(), CONF.category.migration))


def _migration_recover() -> None:
    migration = _conductor().migration_recover(
        volmig_context.get_admin_context(), CONF.category.migration,
        CONF.category.to)
    _print_migration(migration)


def _migration_abort() -> None:
    _print_migration(_conductor().migration_abort(
        volmig_context.get_admin_context(), CONF.category.migration))


def _service_list() -> None:
    print('%-18s %-24s %-8s %-5s %-7s %s' % (
        'binary', 'host', 'status', 'state', 'version', 'last seen'))
    for svc in _conductor().service_get_all(
            volmig_context.get_admin_context(), None):
        print('%-18s %-24s %-8s %-5s %-7s %s%s' % (
            svc['binary'], svc['host'],
            'disabled' if svc['disabled'] else 'enabled',
            'up' if svc['is_up'] else 'down', svc['version'],
            svc['last_seen_at'],
            '  (%s)' % svc['disabled_reason'] if svc['disabled_reason']
            else ''))


def _service_set_disabled(disabled: bool) -> None:
    command = CONF.category
    svc = _conductor().service_set_disabled(
        volmig_context.get_admin_context(), command.binary, command.on_host,
        disabled, getattr(command, 'reason', None))
    print('%s on %s is %s' % (svc['binary'], svc['host'],
                              'disabled' if svc['disabled'] else 'enabled'))


def _service_delete() -> None:
    command = CONF.category
    _conductor().service_delete(volmig_context.get_admin_context(),
                                command.binary, command.on_host)
    print('%s on %s deleted' % (command.binary, command.on_host))


def _server_reset_state() -> None:
    server = _conductor().instance_reset_state(
        volmig_context.get_admin_context(), CONF.category.server,
        CONF.category.state)
    print('server %s: vm_state %s, task_state %s' % (
        server['uuid'], server['vm_state'], server['task_state']))


_COMMANDS = {('db', 'sync'): _db_sync, ('db', 'version'): _db_version,
             ('volume', 'list'): _volume_list,
             ('volume', 'migrate'): _volume_migrate,
             ('pool', 'drain'): _pool_drain,
             ('pool', 'show'): _pool_show,
             ('pool', 'cancel-drain'): _pool_cancel_drain,
             ('migration', 'list'): _migration_list,
             ('migration', 'show'): _migration_show,
             ('migration', 'recover'): _migration_recover,
             ('migration', 'abort'): _migration_abort,
             ('server', 'reset-state'): _server_reset_state,
             ('service', 'list'): _service_list,
             ('service', 'disable'): lambda: _service_set_disabled(True),
             ('service', 'enable'): lambda: _service_set_disabled(False),
             ('service', 'delete'): _service_delete,
             ('image', 'register'): _image_register,
             ('image', 'list'): _image_list,
             ('image', 'delete'): _image_delete,
             ('key', 'create'): keys.create,
             ('key', 'rotate'): keys.rotate,
             ('key', 'export'): keys.export,
             ('key', 'revoke'): keys.revoke,
             ('key', 'list'): keys.list_hosts}


category_opt = cfg.SubCommandOpt('category', title='Commands',
                                 handler=manage_parser.add_parsers)


# Seconds to reach the broker's port.
BROKER_TIMEOUT = 3
# Who answers each category's commands over RPC.
_SERVICES = {'volume': 'volmig-volume', 'pool': 'volmig-volume',
             'migration': 'volmig-conductor', 'service': 'volmig-conductor',
             'server': 'volmig-conductor'}


def _failure(exc: Exception) -> str:
    """The one line a failed command prints."""
    if isinstance(exc, exception.VolmigException):
        return exception.safe_message(exc)
    service = _SERVICES.get(CONF.category.name, 'volmig')
    if isinstance(exc, messaging.MessagingTimeout):
        return ('%s did not answer within %d s ([DEFAULT] '
                'rpc_response_timeout): is it running?'
                % (service, CONF.rpc_response_timeout))
    if isinstance(exc, messaging.MessageDeliveryFailure):
        # A user that may not publish there (tools/rabbitmq-setup.sh): the
        # broker's reason names the topic and the user.
        refused = re.search(r'ACCESS_REFUSED - (.+)', str(exc))
        if refused:
            return 'RabbitMQ refused the call to %s: %s' % (
                service, refused.group(1).strip())
        return 'cannot reach RabbitMQ ([DEFAULT] transport_url) to ask %s' % (
            service)
    if isinstance(exc, db_exc.DBError):
        return 'the database ([database] connection) failed: %s' % (
            str(exc.inner_exception or exc).splitlines()[0])
    if isinstance(exc, OSError):
        return str(exc)
    return '%s: %s' % (type(exc).__name__, str(exc).splitlines()[0]
                       if str(exc) else 'unexpected failure')


def main() -> None:
    CONF.register_cli_opt(category_opt)
    config.parse_args(sys.argv[1:], setup_logging=False)
    # The libraries' log (a broker's retries) is not the command's
    # output: its one line says what failed.
    std_logging.getLogger().handlers[:] = [std_logging.NullHandler()]
    command = _COMMANDS[(CONF.category.name, CONF.category.action)]
    result: dict = {}

    def run() -> None:
        try:
            if CONF.category.name in _SERVICES:
                _check_broker()
                # Then its signing key: a command with none says so. It
                # tries the broker once more, then says so; it never
                # waits for it as a service does.
                rpc.init(retry=1)
            result['status'] = command()
        except Exception as exc:
            result['error'] = _failure(exc)
    # oslo.messaging waits for the broker without end while it sets up
    # the queue of its replies: the command gives up after its timeout.
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(CONF.rpc_response_timeout + BROKER_TIMEOUT)
    if worker.is_alive():
        result['error'] = _failure(messaging.MessagingTimeout())
    if 'error' in result:
        print('error: %s' % result['error'], file=sys.stderr, flush=True)
        os._exit(1)
    sys.exit(result['status'] or 0)


def _check_broker() -> None:
    """Fail at once, saying where, when no broker listens."""
    url = messaging.TransportURL.parse(CONF, CONF.transport_url)
    for host in url.hosts:
        try:
            socket.create_connection((host.hostname, host.port or 5672),
                                     timeout=BROKER_TIMEOUT).close()
            return
        except OSError as exc:
            reason = '%s:%s: %s' % (host.hostname, host.port or 5672,
                                    exc.strerror or exc)
    if url.hosts:
        raise exception.VolmigException(
            'cannot reach RabbitMQ ([DEFAULT] transport_url) at %s'
            % reason)

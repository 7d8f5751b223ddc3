"""volmig-status upgrade check: is this deployment ready to upgrade?

It reads the database directly, as nova-status does, so it works while
services are stopped. Exit codes are oslo.upgradecheck's: 0 success,
1 warning, 2 failure.
"""

import sys
import time

from oslo_upgradecheck import upgradecheck
from oslo_utils import versionutils

from volmig import config
from volmig import context as volmig_context
from volmig import exception
from volmig import signing
from volmig import states
from volmig.compute import rpcapi as compute_rpcapi
from volmig.conductor import services
from volmig.conf import CONF
from volmig.conf import opts
from volmig.db import api as db
from volmig.db import host_keys
from volmig.db import schema as schema
from volmig.signing import keys

Code = upgradecheck.Code
Result = upgradecheck.Result


def _version(text: str) -> tuple:
    return versionutils.convert_version_to_tuple(text)


def previous_release() -> tuple[str, str]:
    """The newest release alias below the compute RPC API of this code."""
    older = [(_version(version), name, version)
             for name, version in compute_rpcapi.VERSION_ALIASES.items()
             if _version(version) < _version(compute_rpcapi.RPC_API_VERSION)]
    _, name, version = max(older)
    return name, version


def _guarded(check):
    """A check that cannot read what it needs fails, naming why."""
    def guarded(self):
        try:
            return check(self)
        except Exception as exc:
            return Result(Code.FAILURE, 'Could not check: %s: %s'
                          % (type(exc).__name__, str(exc).splitlines()[0]))
    return guarded


class Checks(upgradecheck.UpgradeCommands):

    def check(self):
        db.configure(CONF.database.connection)
        return super().check()

    def _schema(self):
        current, head = schema.current_revision(), schema.head_revision()
        if current != head:
            return Result(Code.FAILURE, 'The database schema is at %s; this '
                          'release needs %s. Run "volmig-manage db sync".'
                          % (current or 'nothing', head))
        return Result(Code.SUCCESS, 'Schema at %s.' % head)

    def _computes(self):
        name, floor = previous_release()
        computes = services.get_all(volmig_context.get_admin_context(),
                                    compute_rpcapi.BINARY)
        too_old = ['%s (RPC %s)' % (svc['host'], svc['version'])
                   for svc in computes
                   if _version(svc['version']) < _version(floor)]
        if too_old:
            return Result(Code.FAILURE, 'Compute agents older than the '
                          'previous release %s (RPC %s): %s. Upgrade them '
                          'first, or delete their records with "volmig-'
                          'manage service delete" if the hosts are gone.'
                          % (name, floor, ', '.join(too_old)))
        return Result(Code.SUCCESS, '%d compute agent(s), none older than '
                      '%s.' % (len(computes), name))

    def _service_versions(self):
        mixed = []
        for binary in sorted({svc['binary'] for svc in services.get_all(
                volmig_context.get_admin_context())}):
            versions = sorted({svc['version'] for svc in services.get_all(
                volmig_context.get_admin_context(), binary)}, key=_version)
            if len(versions) > 1:
                mixed.append('%s: %s' % (binary, ', '.join(versions)))
        if mixed:
            return Result(Code.WARNING, 'A rolling upgrade is unfinished; '
                          'services run several RPC versions (%s).'
                          % '; '.join(mixed))
        return Result(Code.SUCCESS, 'Every service of a kind runs one RPC '
                      'version.')

    def _migrations_needing_recovery(self):
        stuck = [migration['id'] for migration in db.migration_get_all(
            volmig_context.get_admin_context(), status=states.ERROR)
            if migration['recovery_needed']]
        if stuck:
            return Result(Code.FAILURE, '%d migration(s) failed and need '
                          'recovery: %s. Finish each with "volmig-manage '
                          'migration recover ID" before upgrading.'
                          % (len(stuck), ', '.join(stuck)))
        return Result(Code.SUCCESS, 'No migration needs recovery.')

    def _signing(self):
        path = keys.key_file(CONF)
        try:
            master = keys.read_master(path)
        except exception.ConfigurationError as exc:
            return Result(Code.FAILURE, exc.message)
        if CONF.signing.allow_unsigned:
            return Result(Code.WARNING, '[signing] allow_unsigned is on: '
                          'messages without a signature are served. Turn '
                          'it off once every service is upgraded.')
        registered = host_keys.load()
        unkeyed = sorted(
            '%s on %s' % (service['binary'], service['host'])
            for binary in (signing.COMPUTE, signing.VOLUME)
            for service in services.get_all(
                volmig_context.get_admin_context(), binary)
            if (binary, service['host']) not in registered)
        if unkeyed:
            return Result(Code.WARNING, 'No key is recorded for %s: their '
                          'messages are refused. Export each one\'s key '
                          '("volmig-manage key export").'
                          % ', '.join(unkeyed))
        return Result(Code.SUCCESS, 'Master key %s, %d key(s) in use; %d '
                      'host(s) hold a key of their own.' % (
                          path, len(keys.usable(master, time.time())),
                          len(registered)))

    _upgrade_checks = tuple(
        (name, _guarded(check)) for name, check in (
            ('Database schema', _schema),
            ('Compute agents', _computes),
            ('Service versions', _service_versions),
            ('Migrations needing recovery', _migrations_needing_recovery),
            ('RPC signing', _signing)))


def main() -> None:
    config.register_opts(CONF)
    opts.set_defaults(CONF)
    sys.exit(upgradecheck.main(CONF, 'volmig', Checks()))

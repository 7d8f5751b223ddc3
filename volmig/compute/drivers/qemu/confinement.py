"""What a guest's QEMU may do: its own user, a full sandbox, no secret,
and no file it opens by name.

A guest escaping into QEMU holds whatever QEMU holds. So:

- Where the agent may switch users (it runs as root, or has CAP_SETUID
  and CAP_SETGID), each guest's QEMU runs as a uid and gid of its own
  from ``[qemu] guest_uid_start``, with no supplementary group. QEMU is
  started as that user, not dropped to it with ``-runas``: QEMU 7.2
  refuses ``-runas`` under ``elevateprivileges=deny``, and its
  ``-daemonize`` fork dies under ``spawn=deny``. So the sandbox denies
  both, and QEMU runs in a session of its own instead of daemonizing.
- QEMU opens nothing by path that it could be pointed elsewhere with:
  the agent binds the QMP, console and NBD sockets and opens the logs,
  and passes them as descriptors; each volume and overlay file is opened
  by the agent and passed over QMP (``add-fd``) into an fd set of its
  own, whose opaque string is the file's path. A QEMU user therefore
  needs no right on any volume file, and has none on another guest's.
- The kernel and initramfs that QEMU reads by path at start-up are
  passed as sealed memory files, since QEMU's loader takes no fd set.
- QEMU and qemu-img get a minimal environment: the agent's holds secrets
  (a unit's OS_DEFAULT__TRANSPORT_URL carries the broker's password).
"""

import contextlib
import fcntl
import os
import socket
import subprocess  # nosec B404

from volmig import exception

ENVIRONMENT = {'PATH': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:'
               '/sbin:/bin', 'LC_ALL': 'C.UTF-8'}
SANDBOX = ('on,obsolete=deny,elevateprivileges=deny,spawn=deny,'
           'resourcecontrol=deny')
FDSET = '/dev/fdset/'
# CAP_SETGID (6) and CAP_SETUID (7) in /proc/self/status's CapEff.
_SWITCH_CAPABILITIES = (1 << 6) | (1 << 7)


def can_switch_users() -> bool:
    if os.geteuid() == 0:
        return True
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('CapEff:'):
                effective = int(line.split()[1], 16)
                return (effective & _SWITCH_CAPABILITIES
                        == _SWITCH_CAPABILITIES)
    return False


def pick_uid(conf, taken: set, by_agent: bool = True) -> int | None:
    """The first free uid of the guests' range; None where QEMU runs as
    the agent's own user. ``by_agent``: the agent starts QEMU itself,
    and can only where it may switch users."""
    if by_agent and not can_switch_users():
        return None
    start = conf.qemu.guest_uid_start
    for uid in range(start, start + conf.qemu.guest_uid_count):
        if uid not in taken:
            return uid
    raise exception.DriverError(
        action='start a guest',
        reason='every uid of [qemu] guest_uid_start %d and the %d after it '
        'is in use by a guest on this host' % (start,
                                              conf.qemu.guest_uid_count))


def listening(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    # The agent, tests and consoles connect as root or the agent's user.
    os.chmod(path, 0o600)
    sock.listen(16)
    return sock


def _memory_copy(path: str, name: str) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    with open(path, 'rb') as source:
        while chunk := source.read(1 << 20):
            os.write(fd, chunk)
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW
                | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return fd


def _groups(command: list[str]) -> list[int]:
    """The one supplementary group a guest's QEMU may need: /dev/kvm's."""
    if 'kvm' in command[command.index('-accel') + 1].split(','):
        return [os.stat('/dev/kvm').st_gid]
    return []


def start(guest, command: list[str], image: dict | None,
          uid: int | None) -> subprocess.Popen:
    """Start QEMU for ``guest``: ``command`` is its machine's arguments;
    this adds every file and socket it needs, as descriptors."""
    keep: list[int] = []
    try:
        # Raw descriptors (detached from their socket objects), closed
        # below once QEMU has its copies.
        keep.append(listening(guest.path('qmp.sock')).detach())
        keep.append(listening(guest.path('console.sock')).detach())
        keep.append(os.open(guest.path('console.log'), os.O_WRONLY
                            | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                            0o600))
        qmp, console, log = keep
        command = command + [
            '-add-fd', 'fd=%d,set=0,opaque=%s' % (log, guest.path(
                'console.log')),
            '-chardev', 'socket,id=console,fd=%d,server=on,wait=off,'
            'logfile=%s0,logappend=on' % (console, FDSET),
            '-serial', 'chardev:console',
            '-chardev', 'socket,id=qmp,fd=%d,server=on,wait=off' % qmp,
            '-mon', 'chardev=qmp,mode=control']
        for key, option in (('kernel', '-kernel'), ('initrd', '-initrd')):
            if image and image.get(key):
                fd = _memory_copy(image[key], key)
                keep.append(fd)
                command += [option, '/proc/self/fd/%d' % fd]
        if image and image.get('kernel'):
            command += ['-append', image.get('cmdline') or '']
        with open(guest.path('qemu.log'), 'ab') as errors:
            os.chmod(guest.path('qemu.log'), 0o600)
            process = subprocess.Popen(  # nosec B603
                command, stdin=subprocess.DEVNULL, stdout=errors,
                stderr=errors, pass_fds=keep, env=ENVIRONMENT,
                start_new_session=True, user=uid, group=uid,
                extra_groups=None if uid is None else _groups(command))
        # Written whole or not at all: a torn pid file would make a live
        # guest look stopped.
        with open(guest.path('qemu.pid.tmp'), 'w') as pid_file:
            pid_file.write('%d\n' % process.pid)
        os.replace(guest.path('qemu.pid.tmp'), guest.path('qemu.pid'))
        return process
    finally:
        # QEMU holds its own copies; the agent keeps none.
        for fd in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def failure(guest) -> str:
    """Why QEMU ended at start-up: the last lines it wrote."""
    try:
        with open(guest.path('qemu.log'), 'rb') as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 2048))
            lines = handle.read().decode('utf-8', 'replace').splitlines()
    except FileNotFoundError:
        lines = []
    return lines[-1].strip() if lines else 'QEMU ended at start-up'


def pass_file(guest, path: str, read_only: bool) -> str:
    """Open ``path`` for the guest's QEMU; the ``/dev/fdset/N`` that it
    opens instead."""
    fd = os.open(path, (os.O_RDONLY if read_only else os.O_RDWR)
                 | os.O_CLOEXEC)
    try:
        added = guest.execute('add-fd', fd=fd, opaque=path)
    finally:
        os.close(fd)
    return '%s%d' % (FDSET, added['fdset-id'])


def file_paths(guest) -> dict:
    """Each file node's filename, as QEMU reports it, to its path."""
    return {'%s%d' % (FDSET, fdset['fdset-id']): fd['opaque']
            for fdset in guest.execute('query-fdsets')
            for fd in fdset['fds'] if fd.get('opaque')}


def release_files(guest) -> None:
    """Close the fd sets that no block node uses any more."""
    with guest.lock:
        used = {node['file']
                for node in guest.execute('query-named-block-nodes')}
        for fdset in guest.execute('query-fdsets'):
            # Set 0 is the console log's, which its character device uses.
            if (fdset['fdset-id'] != 0
                    and '%s%d' % (FDSET, fdset['fdset-id']) not in used):
                guest.execute('remove-fd',
                              **{'fdset-id': fdset['fdset-id']})

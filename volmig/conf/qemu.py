from oslo_config import cfg

qemu_group = cfg.OptGroup('qemu', title='QEMU compute driver options')

qemu_opts = [
    cfg.StrOpt('binary', default='qemu-system-x86_64',
               help='The QEMU system emulator that runs guests.'),
    cfg.StrOpt('img_binary', default='qemu-img',
               help='qemu-img, used to create and merge overlays.'),
    cfg.StrOpt('accel', default='auto', choices=('auto', 'kvm', 'tcg'),
               help='The accelerator. "auto" uses KVM only where the host '
                    'has a hardware KVM module (kvm_intel or kvm_amd): a '
                    '/dev/kvm from a paravirtual nested module cannot run '
                    'a stock kernel. TCG otherwise.'),
    cfg.StrOpt('image_dir', default='$state_path/images',
               help='Guest images that imageRef names, one directory '
                    'each; see "volmig-manage image".'),
    cfg.IntOpt('memory_mb', default=256, min=16,
               help='Guest memory.'),
    cfg.FloatOpt('detach_timeout', default=30.0, min=1.0,
                 help='Seconds a running guest has to release a volume '
                      'being detached (PCIe hot-unplug) before the '
                      'detach fails.'),
    cfg.IntOpt('max_disks', default=8, min=1, max=32,
               help='Hot-pluggable PCIe ports per guest, which bounds the '
                    'volumes one guest can have.'),
    cfg.BoolOpt('direct_io', default=True,
                help='Open volumes with O_DIRECT (cache.direct). Without '
                     'it dirty page cache makes the final switch-over '
                     'pause several times longer.'),
    cfg.BoolOpt('export_disks', default=False,
                help='Export every attached volume over NBD on a unix '
                     'socket in the guest\'s directory, named by volume '
                     'id, writable for "rw" attachments. It stands in for '
                     'the guest OS in tests, demos and benchmarks: writes '
                     'through it reach the same block nodes as the '
                     'guest\'s.'),
    cfg.IntOpt('guest_uid_start', default=1879048192, min=1,
               help='Where the agent may switch users (it runs as root, or '
                    'has CAP_SETUID and CAP_SETGID), each guest\'s QEMU '
                    'runs as a uid, and a gid of the same number, of its '
                    'own, taken from this one on. Nothing else on the host '
                    'may use these ids; the default sits just above '
                    'systemd\'s range for containers (524288-1879048191). '
                    'Elsewhere QEMU runs as the agent\'s user.'),
    cfg.IntOpt('guest_uid_count', default=65536, min=1,
               help='How many uids from guest_uid_start the agent may give '
                    'guests: at most this many guests per host.'),
    cfg.FloatOpt('qmp_timeout', default=30.0, min=1.0,
                 help='Seconds to wait for one QMP command.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(qemu_group)
    conf.register_opts(qemu_opts, group=qemu_group)


def list_opts():
    return [(qemu_group, qemu_opts)]

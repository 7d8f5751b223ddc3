from oslo_config import cfg

libvirt_group = cfg.OptGroup('libvirt', title='libvirt compute driver '
                             'options')

libvirt_opts = [
    cfg.StrOpt('uri', default='qemu:///system',
               help='The libvirt connection of the libvirt driver. Its '
                    'guests run QEMU with the [qemu] settings (accel, '
                    'memory_mb, max_disks, direct_io, image_dir, '
                    'guest_uid_start and guest_uid_count). On a Nova '
                    'compute host, whatever the driver, the agent reads '
                    "Nova's guests on it, read only, when a drain checks "
                    "that Nova's swap moved a guest to its new volume."),
    cfg.IntOpt('reconnect_timeout', default=60, min=0,
               help='Seconds a migration step that failed because libvirtd '
                    'went away (a crash, a restart, an upgrade) waits for '
                    'a new libvirtd, then is taken again: the switch, the '
                    'commit, the roll-back and the recovery. QEMU runs on '
                    'meanwhile, its guest writing to the overlay. Past it '
                    'the step fails as any other, and the conductor\'s '
                    'migration_stall_timeout settles the migration: keep '
                    'this below that.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(libvirt_group)
    conf.register_opts(libvirt_opts, group=libvirt_group)


def list_opts():
    return [(libvirt_group, libvirt_opts)]

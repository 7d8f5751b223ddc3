import os

from oslo_config import cfg

compute_group = cfg.OptGroup('compute', title='Compute agent options')

compute_opts = [
    # No default: an agent that ran the fake driver by mistake would
    # "migrate" volumes without moving a byte.
    cfg.StrOpt('driver',
               help='Compute driver, a volmig.compute.drivers entry point: '
                    '"qemu" (QEMU processes the agent starts itself), '
                    '"libvirt" (libvirt domains), or "fake" (guests in '
                    'memory, no data path; for tests only). Required: the '
                    'agent refuses to start without it.'),
    # Not "$state_path/compute": inside [compute] that names this option.
    cfg.StrOpt('state_path', sample_default='<[DEFAULT] state_path>/compute',
               help='Where the agent keeps guest sockets and job journals.'),
    cfg.IntOpt('job_workers', default=8, min=1,
               help='Threads that run asynchronous jobs (commits, mirrors).'),
    cfg.FloatOpt('job_poll_interval', default=0.5, min=0.01,
                 help='Seconds between polls of a running job.'),
    cfg.FloatOpt('progress_report_interval', default=1.0, min=0,
                 help='Least seconds between two progress reports of a '
                      'job to the conductor.'),
    cfg.IntOpt('progress_reports_per_job', default=20, min=1,
               help='Most progress reports of one job, besides its end: '
                    'a report waits until the job has moved this '
                    'fraction of its total and progress_report_interval '
                    'has passed, whichever is rarer.'),
    cfg.IntOpt('max_concurrent_volume_migrations', default=0, min=0,
               help='Most volumes migrating at once on this host; 0 for no '
                    'cap (Storage vMotion\'s is 2). The agent announces it '
                    'and the conductor holds further starts as "queued".'),
    cfg.StrOpt('announced_rpc_version', default=None,
               help='Announce this compute RPC version instead of the '
                    'latest one. Only for testing rolling upgrades: it makes '
                    'the agent look like an older release.'),
    cfg.IntOpt('shutdown_timeout', default=60, min=0,
               help='Seconds a guest has to shut down cleanly after an '
                    'ACPI power-down (os-stop) before it is stopped hard.'),
    cfg.IntOpt('sync_power_state_interval', default=600, min=1,
               help='Seconds between checks that every server\'s power '
                    'state on record is the guest\'s; a guest that '
                    'powered off or died unseen is recorded as shut off. '
                    'Each check is a call to the conductor, so a cell of '
                    '1,000 hosts at 10 s made 100 calls a second; the '
                    'guests\' own power events are recorded at once '
                    "whatever this is. 600, as Nova's."),
    cfg.StrOpt('my_ip', sample_default='<the host\'s IPv4 address>',
               help='The address block storage exports volumes to for '
                    'this host, sent in its os-brick connector.'),
    cfg.StrOpt('nfs_mount_point_base',
               sample_default='<[DEFAULT] state_path>/mnt',
               help='Where os-brick mounts NFS shares of Cinder volumes, '
                    'each at <base>/<md5 of the share>, as Cinder\'s NFS '
                    'driver and Nova do. A share already mounted there is '
                    'used as it is.'),
    cfg.BoolOpt('stop_guests_on_exit', default=False,
                help='Shut the guests off when the agent stops. Off for a '
                     'real agent, whose guests outlive it; on for the '
                     'embedded default, which stops as one.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(compute_group)
    conf.register_opts(compute_opts, group=compute_group)


def list_opts():
    return [(compute_group, compute_opts)]


def nfs_mount_point_base(conf) -> str:
    return conf.compute.nfs_mount_point_base or os.path.join(
        conf.state_path, 'mnt')


def state_path(conf) -> str:
    return conf.compute.state_path or os.path.join(conf.state_path,
                                                   'compute')

from oslo_config import cfg

storage_group = cfg.OptGroup(
    'storage', title='volmig-volume, the embedded block-storage service')

storage_opts = [
    cfg.DictOpt('pools', default={},
                help='Storage pools, NAME:DIRECTORY,... Volumes are raw '
                     'files in these directories. For several hosts, use '
                     'directories shared over NFS, mounted at the same '
                     'path on every host.'),
    cfg.StrOpt('state_file', default='$state_path/volumes.json',
               deprecated_for_removal=True,
               deprecated_reason='Volume records live in the database.',
               help='The JSON file in which releases before 2027.2 kept '
                    'the volume and attachment records. volmig-volume '
                    'imports it into the database at start-up and renames '
                    'it to <file>.imported.'),
    cfg.IntOpt('copy_chunk_kb', default=4096, min=64,
               help='Size of each read and write of a migration copy. '
                    'Chunks of zeros are skipped, so dst stays sparse. '
                    'A guest\'s write to the same disk may wait behind a '
                    'chunk: smaller chunks lower its latency during a '
                    'copy and slow the copy.'),
    cfg.IntOpt('copy_io_kb', default=0, min=0,
               help='The largest single read or write of a migration copy '
                    'and of its check, within a chunk; 0 for the chunk. '
                    'Smaller I/O slows the copy; at the same rate it did '
                    'not lower a writing guest\'s latency '
                    '(benchmarks.guest_stalls). To keep a copy out of the '
                    'guests\' way, set max_bandwidth_mbps.'),
    cfg.BoolOpt('copy_offload', default=True,
                help='When src and dst share a file system, let the '
                     'kernel copy: a reflink where the file system offers '
                     'one, else copy_file_range (server-side on NFS 4.2). '
                     'Off, or across file systems, volmig-volume reads src '
                     'and writes dst with O_DIRECT.'),
    cfg.BoolOpt('copy_pacing', default=True,
                help='Pace each migration copy (and each hash of a volume '
                     'for a drain) by the guests on the volume\'s disk: '
                     'while others are busy on it (it completes flushes, '
                     'as a guest acknowledging its writes does, in 10 '
                     'of the probe\'s looks a second), the copy slows '
                     'down when a probe that reads the disk as a guest '
                     'would waits, and speeds up when it does not; '
                     'otherwise it runs as fast as the disk and '
                     'max_bandwidth_mbps let it. The copies on one disk '
                     'in a process share one pace. A volume on a file '
                     'system without a block device of this host (an NFS '
                     'share, tmpfs) is not paced, nor is a Cinder NFS '
                     'volume that the compute agent copies or hashes, '
                     'whatever its mount point is. Off, each copy runs as '
                     'fast as the disk and max_bandwidth_mbps let it, '
                     'whoever waits behind it.'),
    cfg.IntOpt('max_bandwidth_mbps', default=0, min=0,
               help='Ceiling of a migration copy\'s rate in MiB/s; 0 for '
                    'none. A migration request may set its own. It bounds '
                    'every pass over the disk: the copy, the hash of src, '
                    'and the check of dst, which reads dst back behind the '
                    'copy; copy_pacing may keep them slower. The compute '
                    'agent\'s copy for Cinder (the compute API\'s path) '
                    'keeps to it too.'),
    cfg.IntOpt('migration_workers', default=4, min=1,
               help='Threads that drive migrations (copy, complete) at '
                    'the same time.'),
    cfg.IntOpt('max_concurrent_copies', default=0, min=0,
               help='Most migrations copying into or out of one pool at '
                    'once; 0 for no cap (Storage vMotion\'s is 8 per '
                    'datastore). A migration over it waits as "queued", '
                    'before any attachment is started, and begins in '
                    'order when a copy of that pool ends.'),
    cfg.FloatOpt('drain_interval', default=1.0, min=0.1,
                 help='Seconds between passes of a pool drain: each begins '
                      'the next volumes its --max-parallel allows and '
                      'retries those that wait for their servers.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(storage_group)
    conf.register_opts(storage_opts, group=storage_group)


def list_opts():
    return [(storage_group, storage_opts)]

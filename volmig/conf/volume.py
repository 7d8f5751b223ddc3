from oslo_config import cfg

volume_group = cfg.OptGroup('volume', title='Block-storage adapter options')

volume_opts = [
    cfg.StrOpt('backend', default='fake',
               help='Block-storage adapter, a volmig.volume.backends entry '
                    'point: "file" is volmig-volume, reached over RPC; '
                    '"fake" keeps volumes as records in a JSON file on this '
                    'host, without data.'),
    cfg.StrOpt('fake_state_file', default='$state_path/fake_volumes.json',
               help='Where the fake adapter keeps its volumes and '
                    'attachments. Every process on one host that uses the '
                    'same file sees the same volumes.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(volume_group)
    conf.register_opts(volume_opts, group=volume_group)


def list_opts():
    return [(volume_group, volume_opts)]

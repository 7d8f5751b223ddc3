from oslo_config import cfg

volume_group = cfg.OptGroup('volume', title='Block-storage adapter options')

volume_opts = [
    cfg.StrOpt('backend', default='fake',
               help='Block-storage adapter, a volmig.block_storage.backends '
                    'entry point: "file" is volmig-volume, reached over RPC; '
                    '"cinder" is Cinder\'s REST API (see [cinder]); '
                    '"fake" keeps volumes as records in the database, '
                    'without data.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(volume_group)
    conf.register_opts(volume_opts, group=volume_group)


def list_opts():
    return [(volume_group, volume_opts)]

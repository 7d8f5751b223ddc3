from oslo_config import cfg
from oslo_db import options as db_options

DEFAULT_CONNECTION = 'sqlite:///$state_path/volmig.sqlite'


def register_opts(conf: cfg.ConfigOpts) -> None:
    db_options.set_defaults(conf, connection=DEFAULT_CONNECTION)


def list_opts():
    # oslo.db publishes its own options to the generator.
    return []

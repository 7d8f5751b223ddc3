from oslo_config import cfg
from oslo_db import options as db_options

DEFAULT_CONNECTION = 'sqlite:///$state_path/volmig.sqlite'
# Connections a process keeps open between transactions. oslo.db keeps
# 5 and opens the rest (up to max_overflow more) for one transaction
# each: a drain's conductor, more than 5 transactions at once, opened a
# PostgreSQL backend for most migrations (5 ms of the server's CPU each,
# measured here). 20 holds what 20 block-storage threads keep busy.
MAX_POOL_SIZE = 20


def register_opts(conf: cfg.ConfigOpts) -> None:
    db_options.set_defaults(conf, connection=DEFAULT_CONNECTION,
                            max_pool_size=MAX_POOL_SIZE)


def list_opts():
    # oslo.db publishes its own options to the generator.
    return []

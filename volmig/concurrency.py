"""Chooses the concurrency backend before anything else is imported.

Threads are the default. eventlet lives only in ``concurrency_eventlet``,
which is imported when an operator opts in, so deleting that module
removes eventlet support and nothing else.
"""

import argparse
import importlib
import os
import warnings

from oslo_config import cfg
from oslo_service import backend

from volmig.conf import default


def configured_backend(argv: list[str]) -> str:
    """Read ``[DEFAULT] concurrency_backend`` from the config files in argv.

    A private ConfigOpts is used because the real one is parsed only after
    the backend has been chosen.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--config-file', action='append')
    parser.add_argument('--config-dir', action='append')
    known, _ = parser.parse_known_args(argv)
    conf = cfg.ConfigOpts()
    conf.register_opts(default.concurrency_opts)
    conf(args=[], project='volmig',
         default_config_files=known.config_file,
         default_config_dirs=known.config_dir)
    return conf.concurrency_backend


def select_backend(argv: list[str]) -> str:
    name = configured_backend(argv)
    if name == 'eventlet':
        importlib.import_module('volmig.concurrency_eventlet').activate()
    else:
        init_threading()
    return name


def stop_executor(executor) -> None:
    """Stop a futurist executor whose own work may submit more work.

    futurist's ``shutdown(wait=True)`` holds the lock that ``submit``
    takes while it waits for the queued work, so a worker that submits
    (a migration's end starting a queued one) would wait on it forever.
    Stop taking work first, so that such a submit raises RuntimeError at
    once, then wait for the workers outside that lock. Work still queued
    is dropped: what it was for is resumed or reconciled at the next
    start, as after a crash.
    """
    executor.shutdown(wait=False)
    executor.shutdown(wait=True)


def init_threading() -> None:
    # futurist imports eventlet whenever it is installed, which warns
    # about a backend this process does not use; and eventlet's green DNS
    # resolver, of no use to threads, would cost each process 0.3 s of
    # start (dnspython).
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    os.environ.setdefault('EVENTLET_NO_GREENDNS', 'yes')
    backend.init_backend(backend.BackendType.THREADING)

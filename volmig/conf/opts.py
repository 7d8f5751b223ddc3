"""Collects every volmig option group for oslo-config-generator."""

from oslo_log import log as logging

from volmig import conf


def list_opts():
    groups: dict = {}
    for module in conf.MODULES:
        for group, opts in module.list_opts():
            key = group.name if group is not None else 'DEFAULT'
            groups.setdefault(key, []).extend(opts)
    return sorted(groups.items())


def set_defaults(conf=None):
    logging.set_defaults(default_log_levels=logging.get_default_log_levels()
                         + ['qemu.qmp=WARNING'])

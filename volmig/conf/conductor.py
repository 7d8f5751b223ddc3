from oslo_config import cfg

conductor_group = cfg.OptGroup('conductor', title='Conductor options')

conductor_opts = [
    cfg.BoolOpt('legacy_operator_topic', default=False,
                help='Serve the calls that delete or override records '
                     '(service disable and delete, server delete and '
                     'reset-state, migration abort, force-complete and '
                     'recover) on the conductor\'s main topic too, as '
                     'conductors before RPC 1.6 did, for an older '
                     'volmig-api or volmig-manage during a rolling '
                     'upgrade. Every '
                     'RabbitMQ user that may call the conductor, an '
                     'agent\'s too, can then make them: turn it off once '
                     'every volmig-api is upgraded.'),
    cfg.IntOpt('heal_interval', default=30, min=1,
               help='Seconds between runs of the task that fails work '
                    'stranded on a dead compute agent and clears stuck '
                    'task states.'),
    cfg.IntOpt('accepted_timeout', default=300, min=1,
               help='Seconds a migration may stay "accepted" (recorded, but '
                    'not yet taken by its compute agent) before it is '
                    'failed. Nothing has been done to the guest by then, so '
                    'failing it is safe.'),
    cfg.IntOpt('migration_stall_timeout', default=120, min=1,
               help='Seconds a migration in progress may go without any '
                    'report from its compute agent. Past it the conductor '
                    'asks the agent to reconcile the migration; past twice '
                    'it, or when the agent is down, the migration is failed '
                    'with recovery_needed, and the agent finishes the '
                    'recovery when it comes back.'),
    cfg.IntOpt('task_timeout', default=300, min=1,
               help='Seconds a server may stay in a task (deleting, '
                    'powering-off, powering-on, attaching or detaching) on '
                    'a live compute agent before the request is taken as '
                    'lost: a delete is sent again, other tasks are '
                    'cleared.'),
    cfg.IntOpt('max_concurrent_volume_migrations', default=0, min=0,
               help='Most volumes migrating at once in the whole cluster; '
                    '0 for no cap. A start over it (or over its agent\'s '
                    '[compute] max_concurrent_volume_migrations) waits as '
                    '"queued" and is started in order when a migration '
                    'ends. The attachments of one volume count once.'),
    cfg.FloatOpt('queue_interval', default=5.0, min=0.1,
                 help='Seconds between looks at the queued migrations, '
                      'besides the one after each migration ends: it '
                      'starts those another conductor freed a slot for.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(conductor_group)
    conf.register_opts(conductor_opts, group=conductor_group)


def list_opts():
    return [(conductor_group, conductor_opts)]

#!/usr/bin/env bash
# Lock volmig down on RabbitMQ: one vhost, one user per service kind.
#
#   tools/rabbitmq-setup.sh [--vhost NAME] [--prefix P] [--host H:PORT]
#                           [--password-dir DIR]
#
# Run it where rabbitmqctl reaches the broker (any node of a cluster).
# It is idempotent: an existing user keeps its password unless its file
# in --password-dir is gone. Each user's password is written to
# DIR/<user> (mode 0600), and the transport_url each kind of host needs
# is printed at the end.
#
# Every user may use its own RPC queues, reply queues and the control
# exchange "volmig". Topic permissions on that exchange decide which
# services a user may send to:
#   volmig-api        -> conductor, conductor's operator calls, compute,
#                        volume
#   volmig-conductor  -> compute, volume, api (the block-storage client:
#                        it carries out Cinder's migrations of attached
#                        volumes through volmig-api, as Cinder would)
#   volmig-compute    -> conductor
#   volmig-volume     -> api (the block-storage client), conductor
#   volmig-manage     -> conductor, conductor's operator calls, volume
#   volmig-client     -> api (Cinder, or any block-storage service)
# So a compute host cannot consume another kind's queue, nor call the
# API's topic, nor the conductor's operator calls (volmig-conductor-
# operator: service disable and delete, server delete and reset-state,
# migration abort, force-complete and recover). Every service may send
# notifications.
#
# A limit of oslo.messaging, not of this script: RPC replies travel through
# the default exchange (amq.default), which routes by queue name, so every
# user that serves calls (api, conductor, compute, volume) must be able to
# publish there, and RabbitMQ checks no routing key on it. Such a user, if
# compromised, could still post a message straight to a queue it names;
# it cannot read, declare or bind another kind's queues. The users that
# only call (manage, client) may not publish there.
set -euo pipefail

vhost=volmig
prefix=volmig
broker=127.0.0.1:5672
password_dir=/etc/volmig/rabbitmq
while [ $# -gt 0 ]; do
    case "$1" in
        --vhost) vhost=$2; shift 2 ;;
        --prefix) prefix=$2; shift 2 ;;
        --host) broker=$2; shift 2 ;;
        --password-dir) password_dir=$2; shift 2 ;;
        -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

ctl() { rabbitmqctl -q "$@"; }
# A service's own topic: the shared queue, its per-host queues and its
# fanout exchange and queues.
own() {
    if [ "$1" = conductor ]; then
        printf 'volmig-conductor(-operator)?(\\..+|_fanout.*)?'
    else
        printf 'volmig-%s(\\..+|_fanout.*)?' "$1"
    fi
}
topics() {
    local kinds=() kind
    for kind in "$@"; do kinds+=("volmig-$kind(\\..+)?"); done
    kinds+=('(versioned_)?notifications\..+')
    (IFS='|'; printf '^(%s)$' "${kinds[*]}")
}

mkdir -p "$password_dir"
chmod 0700 "$password_dir"
ctl add_vhost "$vhost" 2>/dev/null || true

setup_user() {  # kind, the kinds it may send to
    local kind=$1; shift
    local user="$prefix-$kind" file="$password_dir/$prefix-$kind"
    if [ ! -s "$file" ]; then
        (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$file")
        ctl delete_user "$user" >/dev/null 2>&1 || true
    fi
    ctl list_users --no-table-headers | cut -f1 | grep -qx "$user" ||
        ctl add_user "$user" "$(cat "$file")" >/dev/null
    local mine replies
    if [ "$kind" = client ] || [ "$kind" = manage ]; then
        # It only calls: it serves no call, so it sends no reply.
        mine='volmig|reply_.+' replies=''
    else
        mine="volmig|$(own "$kind")|reply_.+" replies='|amq\.default'
    fi
    # configure, write (amq.default carries the replies), read.
    ctl set_permissions -p "$vhost" "$user" "^($mine)\$" \
        "^($mine$replies)\$" "^($mine)\$"
    # write: the routing keys it may publish to the control exchange;
    # read: the keys it may bind its queues with.
    ctl set_topic_permissions -p "$vhost" "$user" volmig \
        "$(topics "$@")" "^$(own "$kind")\$"
    echo "$user: rabbit://$user:$(cat "$file")@$broker/$vhost"
}

echo "transport_url for each kind of service (passwords in $password_dir):"
setup_user api conductor conductor-operator compute volume
setup_user conductor compute volume api
setup_user compute conductor
setup_user volume api conductor
setup_user manage conductor conductor-operator volume
setup_user client api

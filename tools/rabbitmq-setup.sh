#!/usr/bin/env bash
# Lock volmig down on RabbitMQ: one vhost, a user per controller service,
# and a user per host.
#
#   tools/rabbitmq-setup.sh [--vhost NAME] [--prefix P] [--host H:PORT]
#                           [--password-dir DIR] [--compute HOST]...
#                           [--volume HOST]... [--client HOST]...
#
# Run it where rabbitmqctl reaches the broker (any node of a cluster). It
# is idempotent, and adds the hosts it is given to those made before: an
# existing user keeps its password unless its file in --password-dir is
# gone. Each user's password is written to DIR/<user> (mode 0600), and the
# transport_url of each is printed at the end. Remove a host with
# "rabbitmqctl delete_user <prefix>-<kind>.<host>" (and revoke its signing
# key: "volmig-manage key revoke").
#
# The controllers' users, each for its kind of service:
#   volmig-api        -> conductor, conductor's operator calls, compute,
#                        volume
#   volmig-conductor  -> compute, volume, api (the block-storage client:
#                        it carries out Cinder's migrations of attached
#                        volumes through volmig-api, as Cinder would)
#   volmig-manage     -> conductor, conductor's operator calls, volume
# and a user per host, volmig-<kind>.<host>:
#   --compute HOST    volmig-compute on HOST -> conductor
#   --volume HOST     volmig-volume on HOST  -> api (the block-storage
#                     client), conductor
#   --client HOST     a block-storage client (a cinder-volume host, named
#                     by its [DEFAULT] host) -> api
# Topic permissions on the exchange "volmig" decide where each may send.
# A host's user may read, declare and bind only its own queues: its own
# server queue (volmig-compute.HOST), its kind's shared topic queue, and
# the reply and fanout queues that oslo.messaging's queue manager names
# after it ("<topic>_fanout_HOST:..." and "reply_HOST:...", which volmig
# sets up: [oslo_messaging_rabbit] use_queue_manager and hostname; a
# block-storage client sets them in its own configuration). So a compute
# host cannot read another host's queue or replies, bind a queue to
# another's routing key, call the API's topic, or send to the conductor's
# operator calls (volmig-conductor-operator: service disable and delete,
# server delete and reset-state, migration abort, force-complete and
# recover). Every service may send notifications.
#
# A limit of oslo.messaging, not of this script: RPC replies travel through
# the default exchange (amq.default), which routes by queue name, so every
# user that serves calls (api, conductor, compute, volume) must be able to
# publish there, and RabbitMQ checks no routing key on it. Such a user, if
# compromised, can still post a message into a queue it names; it cannot
# read another's. What it posts is refused unless sealed with its own key
# and about its own records, and a reply is taken only sealed by the
# server called (volmig/signing). The users that only call (manage,
# client) may not publish there.
set -euo pipefail

vhost=volmig
prefix=volmig
broker=127.0.0.1:5672
password_dir=/etc/volmig/rabbitmq
hosts=()
while [ $# -gt 0 ]; do
    case "$1" in
        --vhost) vhost=$2; shift 2 ;;
        --prefix) prefix=$2; shift 2 ;;
        --host) broker=$2; shift 2 ;;
        --password-dir) password_dir=$2; shift 2 ;;
        --compute|--volume|--client) hosts+=("${1#--}" "$2"); shift 2 ;;
        -h|--help) sed -n '2,51p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

ctl() { rabbitmqctl -q "$@"; }
# A name as a regular expression matches it: host names have dots.
quoted() { printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g'; }
# A controller service's own topic: the shared queue, its per-host queues
# and its fanout exchange and queues.
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

# user, configure, write, read, topic write, topic read: its password (a
# new one unless its file is there) and permissions; prints its URL.
setup_user() {
    local user=$1 file="$password_dir/$1"
    if [ ! -s "$file" ]; then
        (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$file")
        ctl delete_user "$user" >/dev/null 2>&1 || true
    fi
    ctl list_users --no-table-headers | cut -f1 | grep -qx "$user" ||
        ctl add_user "$user" "$(cat "$file")" >/dev/null
    ctl set_permissions -p "$vhost" "$user" "^($2)\$" "^($3)\$" "^($4)\$"
    # write: the routing keys it may publish to the control exchange;
    # read: the keys it may bind its queues with.
    ctl set_topic_permissions -p "$vhost" "$user" volmig "$5" "^($6)\$"
    echo "$user: rabbit://$user:$(cat "$file")@$broker/$vhost"
}

controller() {  # kind, the kinds it may send to
    local kind=$1; shift
    local mine replies=''
    if [ "$kind" = manage ]; then
        # It only calls: it serves no call, so it sends no reply.
        mine="volmig|reply_[^:]+:volmig-manage:[0-9]+"
    else
        mine="volmig|$(own "$kind")|reply_[^:]+:volmig-$kind:[0-9]+"
        replies='|amq\.default'
    fi
    # configure, write (amq.default carries the replies), read.
    setup_user "$prefix-$kind" "$mine" "$mine$replies" "$mine" \
        "$(topics "$@")" "$(own "$kind")"
}

host() {  # kind, host
    local kind=$1 name=$2 service queues topic replies='|amq\.default'
    local named
    named=$(quoted "$name")
    case "$kind" in
        compute) service=volmig-compute; set -- conductor ;;
        volume) service=volmig-volume; set -- api conductor ;;
        client) service=''; set -- api; replies='' ;;
    esac
    # Its replies (every process on the host), and as a server its
    # kind's shared queue, its own, and its fanout queue.
    queues="volmig|reply_$named:[^:]+:[0-9]+"
    topic='(?!)'
    if [ -n "$service" ]; then
        queues+="|$service|$service\\.$named|${service}_fanout"
        queues+="|${service}_fanout_$named:[^:]+:[0-9]+"
        topic="$service|$service\\.$named"
    fi
    setup_user "$prefix-$kind.$name" "$queues" "$queues$replies" "$queues" \
        "$(topics "$@")" "$topic"
}

echo "transport_url for each service (passwords in $password_dir):"
controller api conductor conductor-operator compute volume
controller conductor compute volume api
controller manage conductor conductor-operator volume
set -- "${hosts[@]+"${hosts[@]}"}"
while [ $# -gt 0 ]; do
    host "$1" "$2"
    shift 2
done

#!/usr/bin/env bash
# Prepares a fresh Debian machine for volmig: system packages (RabbitMQ,
# QEMU, MariaDB, HAProxy), a virtualenv with volmig and its test
# requirements in .venv, and running RabbitMQ, PostgreSQL and MariaDB.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v rabbitmqctl >/dev/null 2>&1 || need_apt+=(rabbitmq-server)
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
command -v qemu-img >/dev/null 2>&1 || need_apt+=(qemu-utils)
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# Cinder's NFS driver runs mount.nfs when it sets up its shares.
command -v mount.nfs >/dev/null 2>&1 || need_apt+=(nfs-common)
command -v pg_ctlcluster >/dev/null 2>&1 || need_apt+=(postgresql)
# MariaDB: the unit and functional tests run on it too; its Galera
# provider (galera-4, a dependency) and HAProxy make the tests' cluster.
command -v mariadbd >/dev/null 2>&1 || need_apt+=(mariadb-server)
command -v haproxy >/dev/null 2>&1 || need_apt+=(haproxy)
python3 -m venv --help >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${need_apt[@]}"
fi
# The libvirt driver: libvirtd, and libvirt-dev for libvirt-python.
need_libvirt=()
command -v libvirtd >/dev/null 2>&1 || need_libvirt+=(libvirt-daemon-system)
[ -e /usr/include/libvirt/libvirt.h ] || need_libvirt+=(libvirt-dev pkg-config)
if [ ${#need_libvirt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    [ ${#need_apt[@]} -gt 0 ] || apt-get update -q
    # Not its recommends (dnsmasq, firewalls, another QEMU); and a
    # configuration file edited by hand is kept, never asked about.
    apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confold "${need_libvirt[@]}"
fi
# What a libvirt host needs (README, "Compute drivers"): each guest's
# QEMU runs as a user of its own, which passes through libvirt's
# directory to its own; and /dev/kvm is the kvm group's, as udev makes
# it on a host whose KVM works (otherwise libvirt probes QEMU again at
# every start, about 40 s).
if [ -d /var/lib/libvirt/qemu ]; then
    chmod o+x /var/lib/libvirt/qemu
fi
if [ -e /dev/kvm ] && getent group kvm >/dev/null; then
    chgrp kvm /dev/kvm
    chmod 0660 /dev/kvm
fi

# The three venvs and the guest image are independent: they are built side
# by side, since each spends about a third of its time waiting on the
# disk. Each job's output goes to a log of its own, printed if it fails.
jobs=()
background() {
    local name=$1; shift
    ( "$@" >"build/bootstrap-$name.log" 2>&1 ||
          { cat "build/bootstrap-$name.log"; exit 1; } ) &
    jobs+=($!)
}
mkdir -p build

# Real Cinder and Keystone for the tests that volmig serves them, each in
# a venv of its own: their pins are not volmig's.
cinder_venv() {
    if [ ! -x .venv-cinder/bin/cinder-api ]; then
        python3 -m venv .venv-cinder
        .venv-cinder/bin/pip install -q cinder==29.0.0 psycopg2-binary
    fi
}
keystone_venv() {
    if [ ! -x .venv-keystone/bin/gunicorn ]; then
        python3 -m venv .venv-keystone
        .venv-keystone/bin/pip install -q keystone==30.0.0 gunicorn \
            psycopg2-binary
    fi
}
# Nova and placement for the tests of a Nova cloud: their own venv, with
# libvirt-python for nova-compute's libvirt driver (libvirt-dev is above).
nova_venv() {
    if [ ! -x .venv-nova/bin/nova-compute ]; then
        python3 -m venv .venv-nova
        .venv-nova/bin/pip install -q nova==34.0.0 \
            openstack-placement==16.0.0 libvirt-python gunicorn \
            psycopg2-binary
    fi
}
# openstackclient in a venv of its own, as an operator has it; volmig is
# installed into it below, which brings in its plugin's commands.
osc_venv() {
    if [ ! -x .venv-osc/bin/openstack ]; then
        python3 -m venv .venv-osc
        .venv-osc/bin/pip install -q python-openstackclient==10.5.0 \
            -r requirements.txt
    fi
}
background cinder cinder_venv
background keystone keystone_venv
background nova nova_venv
background osc osc_venv

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -r requirements.txt -r test-requirements.txt
.venv/bin/pip install -q -e '.[libvirt]'

# volmig-guest, the Linux guest of the demo and the tests.
background guest-image tools/build-guest-image.sh

if ! rabbitmqctl -q status >/dev/null 2>&1; then
    echo "Starting RabbitMQ"
    rabbitmq-server -detached
    # -detached returns before the node has registered with epmd, and
    # await_startup gives up at once on a node that is not there yet.
    for _ in $(seq 60); do
        rabbitmqctl -q ping >/dev/null 2>&1 && break
        sleep 1
    done
fi
rabbitmqctl -q await_startup --timeout 120
# The tests make and drop a vhost each over the management API: a
# request each, where rabbitmqctl starts an Erlang VM (0.5 s of CPU).
rabbitmq-plugins enable -q rabbitmq_management >/dev/null

# PostgreSQL: the integration tests' database, and Cinder's.
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    echo "Starting PostgreSQL"
    for version in $(ls /etc/postgresql); do
        pg_ctlcluster --skip-systemctl-redirect "$version" main start
    done
fi
for _ in $(seq 30); do
    pg_isready -h 127.0.0.1 -p 5432 -q && break
    sleep 1
done
pg_isready -h 127.0.0.1 -p 5432

# MariaDB, and the tests' user on it (root logs in over the socket only).
if ! mariadb-admin -uroot ping >/dev/null 2>&1; then
    echo "Starting MariaDB"
    # Not the init script: it pings with credentials of its own that a
    # machine set up by hand may not have, and calls a healthy server
    # failed.
    install -d -o mysql -g mysql /run/mysqld
    start-stop-daemon --start --oknodo --background --chuid mysql \
        --exec /usr/sbin/mariadbd
    for _ in $(seq 60); do
        mariadb-admin -uroot ping >/dev/null 2>&1 && break
        sleep 1
    done
fi
mariadb -uroot -e "CREATE USER IF NOT EXISTS 'volmig_test'@'127.0.0.1'
    IDENTIFIED BY 'volmig_test';
    GRANT ALL ON *.* TO 'volmig_test'@'127.0.0.1';"

# Every job left to wait for: 'wait PID' fails as its job failed.
for job in "${jobs[@]}"; do
    wait "$job"
done
# volmig's cinder-volume plugin (volmig.cinder_volume), on Cinder's pins;
# and volmig into openstackclient's venv, for its plugin. Only now, as two
# editable installs would write volmig.egg-info at once.
.venv-cinder/bin/pip install -q --no-deps -e .
.venv-osc/bin/pip install -q -e .
echo "volmig is installed in .venv, Cinder in .venv-cinder, Keystone in"
echo ".venv-keystone, Nova and placement in .venv-nova, openstackclient with"
echo "volmig's plugin in .venv-osc;"
echo "RabbitMQ, PostgreSQL and MariaDB are running; volmig-guest is in"
echo "build/guest-image."

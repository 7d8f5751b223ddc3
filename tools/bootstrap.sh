#!/usr/bin/env bash
# Prepares a fresh Debian machine for volmig: system packages (RabbitMQ,
# QEMU), a virtualenv with volmig and its test requirements in .venv, and a
# running RabbitMQ.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v rabbitmqctl >/dev/null 2>&1 || need_apt+=(rabbitmq-server)
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
command -v qemu-img >/dev/null 2>&1 || need_apt+=(qemu-utils)
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
python3 -m venv --help >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${need_apt[@]}"
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -r requirements.txt -r test-requirements.txt
.venv/bin/pip install -q -e .

if ! rabbitmqctl -q status >/dev/null 2>&1; then
    echo "Starting RabbitMQ"
    rabbitmq-server -detached
fi
rabbitmqctl -q await_startup --timeout 120
# volmig-guest, the Linux guest of the demo and the tests.
tools/build-guest-image.sh
echo "volmig is installed in .venv; RabbitMQ is running; volmig-guest is in build/guest-image."

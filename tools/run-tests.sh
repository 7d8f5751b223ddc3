#!/usr/bin/env bash
# The test suite, in the stages a deployment's databases call for, each
# stage timed:
#   - unit and functional tests on SQLite, then on PostgreSQL: they hold
#     the database code, so both dialects are proven;
#   - integration tests (separate processes, RabbitMQ, QEMU, Cinder,
#     Keystone) once, on PostgreSQL, as multi-host deployments run;
#   - the RabbitMQ restart alone: it breaks every connection of every test
#     running at that moment.
# Needs what tools/bootstrap.sh installs, and PostgreSQL on 127.0.0.1:5432
# with trust auth (VOLMIG_TEST_DB_URL names another server).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_URL=${VOLMIG_TEST_DB_URL:-postgresql+psycopg2://postgres@127.0.0.1:5432/postgres}
failed=0
timings=()

summary() {
    # One plain closing line per stage: "<stage>: N passed, N failed".
    # stestr last exits 1 after a failed run: under pipefail and set -e
    # that ended the whole script, and the stages after it never ran.
    { .venv/bin/stestr last 2>/dev/null || true; } | awk -v stage="$1" \
        '/ - Passed:/ {p=$3} / - Failed:/ {f=$3}
         END {printf "%s: %d passed, %d failed\n", stage, p, f}'
}

stage() {
    local name=$1; shift
    local began=$SECONDS
    echo "=== stage $name"
    if ! "$@"; then
        failed=1
    fi
    summary "$name"
    # Every test the stage's filter (its last argument) lists must have a
    # result: a test worker that dies ends its remaining tests silently.
    .venv/bin/stestr list "${!#}" >build/listed.txt 2>/dev/null || true
    if ! { .venv/bin/stestr last --subunit 2>/dev/null || true; } |
            .venv/bin/python -m tests.failures "$name" build/listed.txt \
            >>build/failures.txt; then
        failed=1
        echo "$name: some listed tests have no result"
    fi
    timings+=("$(printf '%-28s %5d s' "$name" $((SECONDS - began)))")
}

# The Sphinx tree and the release notes, warnings as errors: not an
# stestr run, so a summary line of its own. It builds beside the first
# test stage, whose workers leave a third of the CPU idle; its output
# is printed once it is done.
mkdir -p build
: >build/failures.txt
( began=$SECONDS
  .venv/bin/tox -q -e docs
  status=$?
  echo $((SECONDS - began)) >build/docs.seconds
  exit $status ) >build/docs.log 2>&1 &
docs_pid=$!
docs_done() {
    echo "=== stage docs (built beside unit-functional-sqlite)"
    cat build/docs.log
    if wait "$docs_pid"; then
        echo "docs: built"
    else
        failed=1
        echo "docs: FAILED"
    fi
    timings+=("$(printf '%-28s %5d s  (beside the next stage)' docs \
        "$(cat build/docs.seconds)")")
}

# stestr balances its workers by the durations it has recorded; a fresh
# clone has none, and by count alone one worker ran 31 minutes of
# integration tests and the other 23 (and one unit/functional worker 2:23
# to another's 0:42). Seed them from a measured run; each stage's run
# records its own times over the seed's.
.venv/bin/python -m tests.durations stream tests/durations.json \
    | .venv/bin/stestr load --force-init >/dev/null ||
    echo "tests/durations.json not loaded: workers by count"

# Unit and functional tests spend three quarters of their time waiting
# on in-process services' threads (measured: 63 s of CPU in 174 s on two
# workers), so four workers on two cores take half the time.
stage unit-functional-sqlite \
    .venv/bin/stestr run --concurrency 4 'tests\.(unit|functional)\.'
docs_done
stage unit-functional-postgresql \
    env VOLMIG_TEST_DB_URL="$PG_URL" \
    .venv/bin/stestr run --concurrency 4 'tests\.(unit|functional)\.'
# Two workers on two cores. The machine sits a third idle with two, but
# three were no faster (52 tests in 13 minutes, as with two) and starved
# what the tests time: an agent's start missed its 15 s, and a guest's
# console lost a line.
stage integration-postgresql \
    env VOLMIG_TEST_DB_URL="$PG_URL" \
    .venv/bin/stestr run --concurrency 2 'tests\.integration\.'
stage broker-restart \
    env VOLMIG_TEST_DB_URL="$PG_URL" VOLMIG_TEST_BROKER_RESTART=1 \
    .venv/bin/stestr run --concurrency 1 tests.integration.test_broker_restart

echo "=== stage times"
printf '%s\n' "${timings[@]}"
# Last, so that a record of only the output's end still names them.
if [ -s build/failures.txt ]; then
    echo "=== failed tests"
    cat build/failures.txt
fi
exit $failed

#!/usr/bin/env bash
# The test suite, in the stages a deployment's databases call for, each
# stage timed:
#   - unit and functional tests on SQLite, PostgreSQL and MariaDB, at
#     once: they hold the database code, so each dialect is proven;
#   - integration tests (separate processes, RabbitMQ, QEMU, Cinder,
#     Keystone, a Galera cluster) once, on PostgreSQL, as multi-host
#     deployments run; the rolling upgrade again on MariaDB;
#   - the RabbitMQ restart alone: it breaks every connection of every test
#     running at that moment.
# Needs what tools/bootstrap.sh installs, PostgreSQL on 127.0.0.1:5432
# with trust auth (VOLMIG_TEST_DB_URL names another server), and MariaDB
# on 127.0.0.1:3306 with bootstrap's user (VOLMIG_TEST_MARIADB_URL).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_URL=${VOLMIG_TEST_DB_URL:-postgresql+psycopg2://postgres@127.0.0.1:5432/postgres}
MARIADB_URL=${VOLMIG_TEST_MARIADB_URL:-mysql+pymysql://volmig_test:volmig_test@127.0.0.1:3306/}
mkdir -p build
: >build/failures.txt
: >build/timings.txt
rm -f build/failed

# Each stage keeps its own stestr record (build/stestr/<stage>), so that
# stages can run at once; each is seeded with the durations measured in
# a whole run, for stestr balances its workers by them: a fresh clone
# has none, and by count alone one worker ran 31 minutes of integration
# tests and the other 23 (and one unit/functional worker 2:23 to
# another's 0:42).
record() {
    local repo=build/stestr/$1
    rm -rf "$repo"
    mkdir -p "$repo"
    .venv/bin/python -m tests.durations stream tests/durations.json \
        | .venv/bin/stestr --repo-url "$repo" load --force-init \
        >/dev/null || echo "$1: durations not loaded: workers by count"
}

summary() {
    # One plain closing line per stage: "<stage>: N passed, N failed".
    # stestr last exits 1 after a failed run: under pipefail and set -e
    # that ended the whole script, and the stages after it never ran.
    { .venv/bin/stestr --repo-url "build/stestr/$1" last 2>/dev/null ||
        true; } | awk -v stage="$1" \
        '/ - Passed:/ {p=$3} / - Failed:/ {f=$3}
         END {printf "%s: %d passed, %d failed\n", stage, p, f}'
}

# stage NAME [env VAR=VALUE...] CONCURRENCY FILTER
stage() {
    local name=$1 began=$SECONDS
    local filter=${!#} concurrency=${@: -2:1}
    local repo=build/stestr/$name
    local -a environment=("${@:2:$#-3}")
    record "$name"
    echo "=== stage $name"
    if ! env "${environment[@]}" .venv/bin/stestr --repo-url "$repo" run \
            --concurrency "$concurrency" "$filter"; then
        touch build/failed
    fi
    summary "$name"
    # Every test the filter lists must have a result: a test worker that
    # dies ends its remaining tests silently.
    # (stestr list needs a record too, though it reads nothing of it.)
    .venv/bin/stestr --repo-url "$repo" list "$filter" >"$repo/listed.txt" \
        2>/dev/null || true
    if [ ! -s "$repo/listed.txt" ]; then
        touch build/failed
        echo "$name: stestr listed no test for $filter"
    fi
    if ! { .venv/bin/stestr --repo-url "$repo" last --subunit 2>/dev/null ||
            true; } | .venv/bin/python -m tests.failures "$name" \
            "$repo/listed.txt" >>build/failures.txt; then
        touch build/failed
        echo "$name: some listed tests have no result"
    fi
    printf '%-28s %5d s\n' "$name" $((SECONDS - began)) >>build/timings.txt
}

# The Sphinx tree and the release notes, warnings as errors, not an
# stestr run; and the unit and functional tests on each dialect. All
# four at once: the tests spend most of their time waiting on in-process
# services' threads, so three runs of four workers on two cores took
# 178 s together, against 137 s each one after another. Each one's
# output is printed once all are done.
docs() {
    local began=$SECONDS
    echo "=== stage docs"
    if .venv/bin/tox -q -e docs; then
        echo "docs: built"
    else
        touch build/failed
        echo "docs: FAILED"
    fi
    printf '%-28s %5d s\n' docs $((SECONDS - began)) >>build/timings.txt
}
began=$SECONDS
docs >build/docs.log 2>&1 &
stage unit-functional-sqlite 4 'tests\.(unit|functional)\.' \
    >build/unit-functional-sqlite.log 2>&1 &
stage unit-functional-postgresql VOLMIG_TEST_DB_URL="$PG_URL" \
    4 'tests\.(unit|functional)\.' >build/unit-functional-postgresql.log 2>&1 &
stage unit-functional-mariadb VOLMIG_TEST_DB_URL="$MARIADB_URL" \
    4 'tests\.(unit|functional)\.' >build/unit-functional-mariadb.log 2>&1 &
wait
cat build/docs.log build/unit-functional-{sqlite,postgresql,mariadb}.log
printf '%-28s %5d s\n' '(the four at once)' $((SECONDS - began)) \
    >>build/timings.txt

# Two workers on two cores. The machine sits a third idle with two, but
# three were no faster (52 tests in 13 minutes, as with two) and starved
# what the tests time: an agent's start missed its 15 s, and a guest's
# console lost a line.
stage integration-postgresql VOLMIG_TEST_DB_URL="$PG_URL" \
    2 'tests\.integration\.'
# The rolling upgrade again on MariaDB: the previous release's schema
# and services on the other dialect. (The Galera tests, in the stage
# above, run on a cluster of their own.)
stage integration-mariadb VOLMIG_TEST_DB_URL="$MARIADB_URL" \
    2 tests.integration.test_rolling_upgrade
stage broker-restart VOLMIG_TEST_DB_URL="$PG_URL" \
    VOLMIG_TEST_BROKER_RESTART=1 1 tests.integration.test_broker_restart

echo "=== stage times"
cat build/timings.txt
# Last, so that a record of only the output's end still names them.
if [ -s build/failures.txt ]; then
    echo "=== failed tests"
    cat build/failures.txt
fi
[ ! -e build/failed ]

"""Print the failed tests of stestr's last run, each with the tail of
its traceback and nothing of its captured logs, then every listed test
that has no result at all:

    stestr list FILTER > LISTED
    stestr last --subunit | python -m tests.failures STAGE [LISTED]

CI's record keeps only the end of a run's output, where a failed
integration test's pages of captured logs had pushed out its name and
its traceback; .ci/run prints this summary last, so both are kept.

A test worker that dies (the runner itself raised) takes the tests it
had left with it, and stestr still reports a pass: one such run recorded
78 of 123 integration tests. With LISTED, the exit status is 1 when a
listed test has no result.
"""

import sys

import subunit
import testtools

TAIL = 30


def results(stream) -> list[dict]:
    found: list[dict] = []
    result = testtools.StreamToDict(found.append)
    result.startTestRun()
    subunit.ByteStreamToStreamResult(
        stream, non_subunit_name='stdout').run(result)
    result.stopTestRun()
    return found


def main(stage: str, listed_path: str | None = None) -> int:
    tests = results(sys.stdin.buffer)
    for test in tests:
        if test['status'] != 'fail':
            continue
        print(f'--- {stage}: FAILED {test["id"]}')
        detail = test['details'].get('traceback')
        text = detail.as_text() if detail is not None else '(no traceback)'
        print('\n'.join(text.rstrip().splitlines()[-TAIL:]))
    if listed_path is None:
        return 0
    with open(listed_path) as listed:
        missing = sorted({line.strip() for line in listed if line.strip()}
                         - {test['id'] for test in tests})
    for test_id in missing:
        print(f'--- {stage}: NO RESULT {test_id}')
    if missing:
        print(f'--- {stage}: {len(missing)} listed tests have no result '
              '(a test worker died)')
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:3]))

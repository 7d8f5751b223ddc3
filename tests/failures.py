"""Print the failed tests of stestr's last run, each with the tail of
its traceback and nothing of its captured logs:

    stestr last --subunit | python -m tests.failures STAGE

CI's record keeps only the end of a run's output, where a failed
integration test's pages of captured logs had pushed out its name and
its traceback; .ci/run prints this summary last, so both are kept.
"""

import sys

import subunit
import testtools

TAIL = 30


def main(stage: str) -> None:
    failed = []

    def on_test(test: dict) -> None:
        if test['status'] == 'fail':
            failed.append(test)

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    subunit.ByteStreamToStreamResult(
        sys.stdin.buffer, non_subunit_name='stdout').run(result)
    result.stopTestRun()
    for test in failed:
        print(f'--- {stage}: FAILED {test["id"]}')
        detail = test['details'].get('traceback')
        text = detail.as_text() if detail is not None else '(no traceback)'
        print('\n'.join(text.rstrip().splitlines()[-TAIL:]))


if __name__ == '__main__':
    main(sys.argv[1])

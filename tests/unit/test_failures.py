"""CI's summary of a stestr run: failed tests, and listed tests with no
result (a test worker that died)."""

import io

import fixtures
from oslotest import base
import subunit

from tests import failures


def _stream(results: dict[str, str]) -> bytes:
    out = io.BytesIO()
    writer = subunit.StreamResultToBytes(out)
    for test_id, status in results.items():
        writer.status(test_id=test_id, test_status='inprogress')
        writer.status(test_id=test_id, test_status=status)
    return out.getvalue()


class FailuresTest(base.BaseTestCase):

    def _run(self, results: dict[str, str], listed: list[str]):
        path = self.useFixture(fixtures.TempDir()).join('listed.txt')
        with open(path, 'w') as handle:
            handle.write(''.join(test_id + '\n' for test_id in listed))
        stdin = io.TextIOWrapper(io.BytesIO(_stream(results)))
        self.useFixture(fixtures.MonkeyPatch('sys.stdin', stdin))
        printed = self.useFixture(fixtures.StringStream('stdout')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', printed))
        status = failures.main('stage', path)
        printed.seek(0)
        return status, printed.read()

    def test_every_listed_test_with_a_result(self):
        status, printed = self._run({'a.test_one': 'success',
                                     'a.test_two': 'skip'},
                                    ['a.test_one', 'a.test_two'])
        self.assertEqual(0, status)
        self.assertEqual('', printed)

    def test_listed_tests_without_a_result_are_named_and_fail(self):
        status, printed = self._run({'a.test_one': 'success'},
                                    ['a.test_one', 'a.test_two',
                                     'a.test_three'])
        self.assertEqual(1, status)
        self.assertIn('stage: NO RESULT a.test_two', printed)
        self.assertIn('stage: NO RESULT a.test_three', printed)
        self.assertIn('2 listed tests have no result', printed)

    def test_failed_test_is_named(self):
        status, printed = self._run({'a.test_one': 'fail'}, ['a.test_one'])
        self.assertEqual(0, status)
        self.assertIn('stage: FAILED a.test_one', printed)

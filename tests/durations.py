"""Seed stestr's record of test durations, so that a fresh clone's first
run balances its workers by time rather than by count (by count, one CI
worker ran 31 minutes of integration tests and the other 23).

    stestr list | python -m tests.durations save RECORD tests/durations.json
    python -m tests.durations stream tests/durations.json | \\
        stestr --repo-url RECORD load --force-init

``save`` takes the times that the stestr record in RECORD (a directory
holding ``.stestr``; tools/run-tests.sh keeps one a stage, in
``build/stestr/<stage>``) recorded for the listed tests; ``stream``
writes a subunit v2 stream with one passing test per entry, lasting its
recorded time, which stestr records and schedules by.
"""

import datetime
import json
import sys

from stestr.repository import file as repo_file
from subunit import v2


def save(directory: str, path: str) -> None:
    repository = repo_file.RepositoryFactory().open(directory)
    ids = [line.strip() for line in sys.stdin if line.strip()]
    known = repository.get_test_times(ids)['known']
    with open(path, 'w') as handle:
        json.dump({test_id: round(seconds, 1)
                   for test_id, seconds in sorted(known.items())},
                  handle, indent=0, sort_keys=True)
        handle.write('\n')


def stream(path: str) -> None:
    with open(path) as handle:
        durations = json.load(handle)
    out = v2.StreamResultToBytes(sys.stdout.buffer)
    start = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
    for test_id, seconds in sorted(durations.items()):
        out.status(test_id=test_id, test_status='inprogress',
                   timestamp=start)
        out.status(test_id=test_id, test_status='success',
                   timestamp=start + datetime.timedelta(seconds=seconds))
    sys.stdout.flush()


if __name__ == '__main__':
    {'save': save, 'stream': stream}[sys.argv[1]](*sys.argv[2:])

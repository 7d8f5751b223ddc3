"""The copy's pace over time beside the guest's latency, from the pace's
own decisions (logged at debug level by the process that copies) and
the guest's acknowledged writes: a table, and a plot of it.

The plot needs matplotlib (``pip install volmig[bench]``).
"""

import datetime
import re

# volmig.datapath.pacing's line, with oslo.log's time stamp before it.
LINE = re.compile(
    r'^(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*Pace on device '
    r'\w+: (?P<rate>\d+) MiB/s for \d+ copies; probe (?P<delay>[\d.]+) ms')


def decisions(log_path: str, clock_offset: float) -> list[tuple]:
    """(monotonic time, MiB/s, the probes' delay in ms) of each decision
    in the log; ``clock_offset``: wall clock minus monotonic clock."""
    found = []
    with open(log_path, encoding='utf-8', errors='replace') as log:
        for line in log:
            matched = LINE.match(line)
            if matched:
                # oslo.log stamps local time, as a naive datetime is.
                when = datetime.datetime.strptime(
                    matched['when'], '%Y-%m-%d %H:%M:%S.%f').timestamp()
                found.append((when - clock_offset, float(matched['rate']),
                              float(matched['delay'])))
    return found


def rows(trace: list[tuple], acks: list[float], began: float,
         ended: float) -> list[tuple]:
    """Per decision in [began, ended]: (seconds into the window, MiB/s,
    probe delay ms, the guest's longest wait since the last decision)."""
    found = []
    last = began
    for when, rate, delay in trace:
        if not began <= when <= ended:
            continue
        waits = [(after - before) * 1000 for before, after
                 in zip(acks, acks[1:], strict=False)
                 if after >= last and before <= when]
        found.append((when - began, rate, delay, max(waits, default=0.0)))
        last = when
    return found


def plot(path: str, title: str, windows: list[list[tuple]]) -> None:
    """One panel per copy window: the rate, and the guest's longest
    wait and the probes' delay on a second axis."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use('Agg')
    from matplotlib import pyplot  # noqa: PLC0415

    figure, axes = pyplot.subplots(len(windows), 1, squeeze=False,
                                   figsize=(9, 2.6 * len(windows)),
                                   sharex=True)
    for n, (axis, window) in enumerate(zip(axes[:, 0], windows,
                                           strict=True)):
        seconds = [row[0] for row in window]
        axis.step(seconds, [row[1] for row in window], where='post',
                  color='tab:blue', label='pace, MiB/s')
        axis.set_ylabel('MiB/s')
        axis.set_title('run %d' % (n + 1), fontsize='small', loc='left')
        waits = axis.twinx()
        waits.plot(seconds, [row[3] for row in window], color='tab:red',
                   linewidth=0.8, label="guest's longest wait, ms")
        waits.plot(seconds, [row[2] for row in window], color='tab:gray',
                   linewidth=0.8, label="probes' delay, ms")
        waits.set_ylabel('ms')
        axis.set_ylim(bottom=0)
        waits.set_ylim(bottom=0)
        if n == 0:
            lines = axis.get_legend_handles_labels()
            more = waits.get_legend_handles_labels()
            axis.legend(lines[0] + more[0], lines[1] + more[1],
                        fontsize='small', loc='upper right')
    axes[-1, 0].set_xlabel('seconds into the copy')
    figure.suptitle(title, fontsize='medium')
    figure.tight_layout()
    figure.savefig(path)

"""Log polling by sinceTime with the overlap dropped line by line (L29-L31)."""

import gzip

from catchup_assets.backends.kubernetes.pod_logs import Cursor, LogSpool, new_lines, since_param
from catchup_assets.store.log_archive import archive


class Body:
    """A log response as urllib3 gives it: streamed in chunks."""

    def __init__(self, data: bytes):
        self.data = data

    def stream(self, n, decode_content=True):
        for i in range(0, len(self.data), 7):  # odd chunk boundaries on purpose
            yield self.data[i : i + 7]


def test_L30_overlap_of_a_since_time_read_is_dropped_per_line():
    cur = Cursor()
    first = ["2026-11-29T08:00:01.5Z a", "2026-11-29T08:00:02.25Z b", "2026-11-29T08:00:02.25Z c"]
    assert list(new_lines(first, cur)) == ["a", "b", "c"]
    assert since_param(cur) == "2026-11-29T08:00:02Z"  # whole seconds: the second is read again
    again = ["2026-11-29T08:00:02.25Z b", "2026-11-29T08:00:02.25Z c", "2026-11-29T08:00:02.5Z d"]
    assert list(new_lines(again, cur)) == ["d"]


def test_L30_trimmed_fractions_still_order_correctly():
    cur = Cursor()
    # Go prints .1234 and .12345 for two instants: the later must not be taken as earlier
    assert list(new_lines(["2026-11-29T08:00:01.1234Z x", "2026-11-29T08:00:01.12345Z y"], cur)) == ["x", "y"]


def test_L29_a_carriage_return_meter_cannot_kill_the_stream(tmp_path):
    meter = b"2026-11-29T08:00:01Z " + b"progress 1%\r" * 300_000 + b"\n2026-11-29T08:00:02Z after\n"
    spool = LogSpool(tmp_path, lambda pod, since: Body(meter))
    assert spool.poll("a1", "pod")
    lines = list(spool.lines("a1"))
    assert lines[-1] == "after" and max(len(x) for x in lines) <= 65536


def test_L31_final_read_is_bounded_and_the_archive_is_gzip(tmp_path):
    calls = []

    def flaky(pod, since):
        calls.append(since)
        if len(calls) < 3:
            raise OSError("connection reset")
        return Body(b"2026-11-29T08:00:01Z last words\n")

    spool = LogSpool(tmp_path / "spool", flaky)
    spool.final_read("a1", "pod", tries=3)
    assert len(calls) == 3
    dest = tmp_path / "a1.log.gz"
    archive(spool.split("a1").own, str(dest))
    assert gzip.decompress(dest.read_bytes()) == b"last words\n"
    never = LogSpool(tmp_path / "s2", lambda pod, since: (_ for _ in ()).throw(OSError("gone")))
    never.final_read("a2", "pod", tries=2)  # gives up without raising


def test_L24_L30_a_metric_report_split_across_two_polls_is_read_whole(tmp_path):
    """The first poll ends after `count`; the second, from the same second (sinceTime),
    repeats the overlap and brings `sum`: the spool holds the report once, in order."""
    from catchup_assets.core.measure.logparse import parse_worker_log
    from catchup_assets.sim.core_log import tx_apply_report

    report = tx_apply_report(1532, 1.47073e06, when="2026-11-29T08:00:02.000")
    stamped = [f"2026-11-29T08:00:02.{i:09d}Z {line}" for i, line in enumerate(report, start=1)]
    cut = next(i for i, line in enumerate(stamped) if "count = " in line) + 1
    reads = iter([stamped[:cut], stamped])  # the kubelet answers from the start of the second again
    spool = LogSpool(tmp_path, lambda pod, since: Body(("\n".join(next(reads)) + "\n").encode()))
    assert spool.poll("a1", "pod") and spool.poll("a1", "pod")
    assert list(spool.lines("a1")) == report
    facts = parse_worker_log(spool.lines("a1"))
    assert (facts.tx_apply_count, facts.tx_apply_seconds) == (1532, 1470.73)

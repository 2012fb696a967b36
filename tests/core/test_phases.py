"""Issue 25 item 1: an attempt's setup_seconds from stellar-core's catchup phase lines.

Lines as stellar-core logs them (core/measure/phases.py names the commit); a table of logs whose
phase lines are complete, missing, repeated or interleaved: the first complete reading or None.
"""

from __future__ import annotations

import pytest

from catchup_assets.core.measure.logparse import parse_worker_log
from catchup_assets.core.measure.phases import parse_setup_seconds


def at(seconds: int, partition: str, message: str, level: str = "INFO") -> str:
    m, s = divmod(seconds, 60)
    return f"2026-08-05T10:{m:02d}:{s:02d}.000 GABCD [{partition} {level}] {message}"


START = at(0, "default", "Config from stellar-core.cfg")
HAS = at(2, "History", "Downloading history archive state: history/00/0f/3f/history-000f3fff.json")
BEGIN = at(10, "History", "Applying buckets")
EST = at(11, "History", "ApplyBuckets estimated 41666 ledger entries")
DONE = at(400, "History", "ApplyBuckets : done, assuming state")
REPLAY = at(420, "History", "Downloading, unzipping and applying transactions for checkpoint 1000063")
REPLAY2 = at(900, "History", "Downloading, unzipping and applying transactions for checkpoint 1000127")
FINISHED = at(1000, "History", "Catchup finished")

CASES = [
    ("fresh start, whole", [START, HAS, BEGIN, EST, DONE, REPLAY, REPLAY2, FINISHED], 420.0),
    ("resumed leg: no bucket apply", [START, HAS, at(5, "History", REPLAY.split("] ")[1]), REPLAY2], 5.0),
    ("worker lines before the first stamp", ["RESUME DECLINED: fresh", START, BEGIN, DONE, REPLAY], 420.0),
    ("no replay line (cut before it)", [START, HAS, BEGIN, EST, DONE], None),
    ("bucket apply never done", [START, BEGIN, EST, REPLAY], None),
    ("no phase lines at all", [START, FINISHED], None),
    ("no stamps at all", ["RESUME DECLINED: x", "  toLedger: 1000063"], None),
    ("retried bucket apply: the first complete reading", [START, BEGIN, BEGIN, DONE, REPLAY, REPLAY2], 420.0),
    ("bucket apply retried after a done", [START, BEGIN, DONE, BEGIN, DONE, REPLAY], 420.0),
    (
        "another thread's lines between",
        [START, BEGIN, at(50, "Bucket", "Bucket-apply: 10 entries"), DONE, at(410, "Overlay", "x"), REPLAY],
        420.0,
    ),
    (
        "another partition quoting the replay text is not replay",
        [START, at(30, "Tx", "Downloading, unzipping and applying transactions for checkpoint 63"), REPLAY],
        420.0,
    ),
    ("a stamp running backwards", [at(500, "default", "Config from x"), REPLAY], None),
    (
        "a collector's own stamp before each line",
        ["2026-08-05T10:00:00.000000000Z " + START, "2026-08-05T10:07:00.000000000Z " + REPLAY],
        420.0,
    ),
]


@pytest.mark.parametrize(("lines", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_issue25_setup_seconds_first_complete_reading_or_none(lines, expected) -> None:
    assert parse_setup_seconds(lines) == expected
    assert parse_worker_log(lines).setup_seconds == expected

"""Splitting shipped logs off an attempt's log and storing them as their own attempts' logs (L29, L31)."""

from __future__ import annotations

import gzip

from catchup_assets.backends.shipping import lines, ship, split_log
from catchup_assets.core.measure import shipped
from catchup_assets.core.measure.logparse import parse_worker_log
from catchup_assets.sim.core_log import tx_apply_report


def text(*lines_: str) -> bytes:
    return "".join(f"{ln}\n" for ln in lines_).encode()


def section(attempt: int, *lines_: str) -> bytes:
    return shipped.section(attempt, shipped.log_file(attempt), text(*lines_))


def test_L31_sections_go_apart_and_the_parser_sees_only_the_attempt_s_own_lines(tmp_path):
    first = ["RESUME DECLINED: no range marker in the data dir (never started here)", *tx_apply_report(111, 1e3)]
    third = ["RESUME: range x from LCL 500 toward target 640"]
    meter = b"progress 1%\r" * 200_000  # one 2.4 MB "line" of the attempt's own, longer than a read
    own = text("WORKER: range x target 640 count 320", "RESUME: range x from LCL 600 toward target 640")
    own += meter + b"\n" + text(*tx_apply_report(222, 2e3))
    src = tmp_path / "spool.log"
    src.write_bytes(section(1, *first) + section(3, *third) + own)

    parts = split_log(src, tmp_path / "own.log")
    assert parts.own.read_bytes() == own  # byte for byte, carriage returns and all
    assert sorted(parts.shipped) == [1, 3]
    assert parts.shipped[1].read_bytes() == text(*first) and parts.shipped[3].read_bytes() == text(*third)
    facts = parse_worker_log(lines(parts.own))
    assert (facts.tx_apply_count, facts.resumed_from_ledger) == (222, 600)  # never attempt 1's 111
    assert split_log(src, tmp_path / "own.log") == parts and parts.own.read_bytes() == own  # again: the same


def test_L31_a_section_whose_end_never_came_runs_to_the_end_and_only_its_own_end_closes_it(tmp_path):
    src = tmp_path / "spool.log"
    body = [shipped.end_line(2), shipped.begin_line(4, "logs/a004.log"), "last line before the pod went"]
    src.write_bytes(text(shipped.begin_line(1, "logs/a001.log"), *body))
    parts = split_log(src, tmp_path / "own.log")
    assert parts.own.read_bytes() == b"" and parts.shipped[1].read_bytes() == text(*body)
    # Marker text that is not a whole line of its own is content.
    for data in (b"x " + section(1, "y"), shipped.begin_line(1, "logs/a001.log").encode()):  # no newline
        src.write_bytes(data)
        parts = split_log(src, tmp_path / "own.log")
        assert parts.shipped == {} and parts.own.read_bytes() == data


def test_L31_whatever_a_shipped_file_ends_with_its_section_ends_at_its_end_line(tmp_path):
    """The entrypoint prints a newline of its own before the end line; splitting takes it off again."""
    src = tmp_path / "spool.log"
    for content, back in [
        (b"a\n", b"a\n"),
        (b"a\n\n", b"a\n\n"),  # an empty last line of the file's own is kept
        (b"", b""),
        (b"cut off mid-li", b"cut off mid-li\n"),  # its writer was killed mid-line
        (b"a\n\0\0\0", b"a\n\0\0\0\n"),  # NULs where a crash left the file's tail unwritten
    ]:
        src.write_bytes(shipped.section(1, "logs/a001.log", content) + b"own\n")
        parts = split_log(src, tmp_path / "own.log")
        assert parts.shipped[1].read_bytes() == back and parts.own.read_bytes() == b"own\n", content


def test_L31_a_shipped_log_is_stored_where_the_stored_one_is_missing_shorter_or_torn(tmp_path):
    def url(n: int) -> str:
        return str(tmp_path / "logs" / f"a{n:03d}.log.gz")

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a001.log.gz").write_bytes(gzip.compress(b""))  # its pod vanished: an empty read
    complete = gzip.compress(text("two", "lines"))
    (tmp_path / "logs" / "a002.log.gz").write_bytes(complete)  # its own final read got it all
    (tmp_path / "logs" / "a004.log.gz").write_bytes(b"not gzip at all")
    src = tmp_path / "spool.log"
    sections = section(1, "one") + section(2, "two", "lines") + section(3, "three") + section(4, "four")
    src.write_bytes(sections + section(6, "a later attempt's?") + text("own"))

    parts = split_log(src, tmp_path / "own.log")
    assert ship(parts, 5, url) == [1, 3, 4]
    assert [gzip.decompress((tmp_path / "logs" / f"a00{n}.log.gz").read_bytes()) for n in (1, 3, 4)] == [
        text("one"),
        text("three"),
        text("four"),
    ]
    assert (tmp_path / "logs" / "a002.log.gz").read_bytes() == complete  # an equal copy is not written again
    assert not (tmp_path / "logs" / "a006.log.gz").exists()  # not an earlier attempt: dropped
    assert ship(parts, 5, url) == []  # shipped twice, stored once
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [f"a00{n}.log.gz" for n in (1, 2, 3, 4)]

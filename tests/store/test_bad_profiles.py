"""Every bad previous profile is named (issue 24 items 4 and 5; L34, L35): a row that cannot size a range
is skipped with a warning naming the file and the row, a repeat or a mix is warned, a column of the wrong
type is refused naming it, and a URL that hangs is given up on within one profile_timeout_seconds.

Each case writes a real Parquet profile with pyarrow and goes through `catchup-assets plan --profile`.
"""

from __future__ import annotations

import re
import socket
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catchup_assets.cli.main import run
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.values.ledger_range import format_key
from catchup_assets.mission.plan import prepare
from catchup_assets.store.profiles import ProfileUnavailable, load_previous_profile
from catchup_assets.store.tables import PROFILE_SCHEMA

GiB = 1024**3
SIZE = 16000


def row(i: int, mission: str = "m1", peak: int | None = None, **over) -> dict:
    """The profile row of the i-th range (from 0) of a 16000-ledger grid."""
    first, last = i * SIZE + 1, (i + 1) * SIZE
    return {
        "range_key": format_key(first, last),
        "first_ledger": first,
        "last_ledger": last,
        "peak_anon_bytes": peak or (1 + i % 4) * GiB,
        "peak_working_set_bytes": (1 + i % 4) * GiB,
        "seconds": 100.0 + i,
        "completed": True,
        "mission": mission,
        **over,
    }


def fifty(**over) -> list[dict]:
    return [row(i, **over) for i in range(50)]


def table(rows: list[dict], schema: pa.Schema = PROFILE_SCHEMA) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def as_strings(*names: str) -> pa.Table:
    """The good profile with these columns stored as strings (a CSV round trip's doing)."""
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in names else f for f in PROFILE_SCHEMA])
    rows = [{k: (str(v) if k in names else v) for k, v in r.items()} for r in fifty()]
    return table(rows, schema)


DUPLICATES = table(fifty() + [row(i, peak=9 * GiB, mission="m2") for i in (1, 3, 5, 7, 9)])
KEY_1, KEY_3 = format_key(SIZE + 1, 2 * SIZE), format_key(3 * SIZE + 1, 4 * SIZE)

# (case, profile table, what the log or the refusal says, measured ranges `plan` then prints; None: refused)
CASES = [
    (
        "duplicate keys: the last row of each is kept, saying which rows",
        DUPLICATES,
        rf"5 range key\(s\) repeated, the last row of each is kept \(the newer measurement\): {KEY_1} rows 2, 51; "
        rf"{KEY_3} rows 4, 52",
        50,
    ),
    (
        "overlapping ranges: the one starting higher is skipped, naming both rows",
        table(fifty() + [row(0, range_key=format_key(8001, 24000), first_ledger=8001, last_ledger=24000)]),
        r"row 51 \(0000008001-0000024000\) skipped: it overlaps row 1 \(0000000001-0000016000\), which starts lower",
        50,
    ),
    (
        "an inverted range is skipped, naming its row",
        table(fifty() + [row(50, first_ledger=SIZE * 52, last_ledger=SIZE * 51 + 1)]),
        r"row 51 \(0000800001-0000816000\) skipped: inverted range: first_ledger 832000 > last_ledger 816001",
        50,
    ),
    (
        "a last_ledger of 2^62 is a skipped row, not the whole command's end",
        table(fifty() + [row(50, last_ledger=2**62)]),
        r"row 51 \(0000800001-0000816000\) skipped: last_ledger 4611686018427387904 is not a ledger number",
        50,
    ),
    (
        "a key its ledgers disagree with is skipped",
        table(fifty() + [row(50, range_key=format_key(1, 99))]),
        r"row 51 \(0000000001-0000000099\) skipped: range_key 0000000001-0000000099 disagrees with first_ledger",
        50,
    ),
    (
        "rows of three missions are warned with their counts",
        table([row(i, mission=f"m{1 + i // 20}") for i in range(50)]),
        r"mixes rows of 3 missions \(m1 20, m2 20, m3 10\): each range is sized from its own row",
        50,
    ),
    ("peaks stored as strings are refused naming the column", as_strings("peak_anon_bytes"),
     r"column peak_anon_bytes is string, not int64", None),
    ("seconds and a flag stored as strings: each column named", as_strings("seconds", "completed"),
     r"column seconds is string, not float64; column completed is string, not bool", None),
    ("every row unusable: refused", table([row(i, last_ledger=2**40) for i in range(3)]),
     r"has no usable row: each was skipped, as warned", None),
]  # fmt: skip


@pytest.mark.parametrize("case, data, says, measured", CASES, ids=[c[0] for c in CASES])
def test_L35_a_bad_profile_is_named_through_plan(case, data, says, measured, tmp_path, caplog, capsys):
    path = tmp_path / "range_profile.parquet"
    pq.write_table(data, path)
    code = run(["plan", "--profile", str(path)])
    out, err = capsys.readouterr()
    if measured is None:
        assert code == 2 and f"--profile: previous profile {path}" in err and re.search(says, err), err
        assert "Traceback" not in err
        return
    assert code == 0, err
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(re.search(says, w) and str(path) in w for w in warned), warned
    assert f"{measured} measured ranges" in out


def test_L35_of_repeated_keys_the_last_row_sizes_the_range(tmp_path):
    """The repeats (rows 51-55) carry 9 GiB: they are what the index holds for their ranges."""
    path = tmp_path / "p.parquet"
    pq.write_table(DUPLICATES, path)
    previous = load_previous_profile(str(path))
    assert len(previous.rows) == 50 and len(previous.index) == 50
    assert [previous.index.lookup(last).peak_anon_bytes for last in (2 * SIZE, 3 * SIZE)] == [9 * GiB, 3 * GiB]


def test_L35_fit_tiers_counts_the_ranges_it_keeps_and_warns_of_the_repeats(tmp_path, caplog, capsys):
    """fit-tiers once counted 50 ranges for 55 rows without a word."""
    path = tmp_path / "p.parquet"
    pq.write_table(DUPLICATES, path)
    assert run(["fit-tiers", "--profile", str(path), "--max-tiers", "2"]) == 0
    assert f"fitted to {path} (50 ranges)" in capsys.readouterr().out
    assert "5 range key(s) repeated" in caplog.text


def _hanging_server(drip: bool):
    """A server that accepts every connection and never answers (or drips a promised body a byte at a time)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()
    held = []

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if drip:
                threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    def trickle(conn):
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(0.2):
                conn.sendall(b"x")
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return server, stop, held


TIMEOUT = 6.0  # long enough that two waits of it (a probe, then a GET) overshoot TIMEOUT + 5


@pytest.mark.parametrize("drip", [False, True], ids=["silent", "dripping"])
def test_L35_a_hanging_url_is_refused_within_one_profile_timeout(drip):
    """A URL that accepted and never answered held `plan` 123-140 s against a timeout of 60."""
    server, stop, held = _hanging_server(drip)
    url = f"http://127.0.0.1:{server.getsockname()[1]}/range_profile.parquet"
    cfg = MissionConfig("m1", MissionSpan(1, 64000), "memory://bad-profiles", previous_profile=url,
                        profile_timeout_seconds=TIMEOUT)  # fmt: skip
    started = time.monotonic()
    try:
        with pytest.raises(ProfileUnavailable, match=f"previous profile {re.escape(url)} is unreachable"):
            prepare(cfg)  # what mission_plan calls
    finally:
        stop.set()
        server.close()
        for conn in held:
            conn.close()
    assert time.monotonic() - started < TIMEOUT + 5


def test_L35_a_file_of_bad_rows_names_the_first_and_counts_the_rest(tmp_path, caplog):
    """500 bad rows are 20 named warnings and one count, not 500 lines burying the run's log."""
    path = tmp_path / "p.parquet"
    pq.write_table(table(fifty() + [row(50 + i, last_ledger=2**40) for i in range(500)]), path)
    previous = load_previous_profile(str(path))
    assert len(previous.rows) == 50 and len(previous.notes) == 21
    assert sum("skipped: last_ledger 1099511627776 is not a ledger number" in n for n in previous.notes) == 20
    assert previous.notes[-1].startswith(f"previous profile {path}: 480 more rows skipped as the above: rows 71, 72")
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 21

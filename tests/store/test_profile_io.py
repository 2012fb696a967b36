"""The previous profile from a path or a URL (L35)."""

import functools
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest

from catchup_assets.core.errors import StateError
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.profiles import ProfileRefused, ProfileUnavailable, load_previous_profile
from catchup_assets.store.tables import NotATable, parse_table, profile_table

GiB = 1024**3


@pytest.fixture
def profile_file(tmp_path):
    recs = [
        AttemptRecord(
            "m1",
            "0000016001-0000032000",
            1,
            "ok",
            peak_anon_bytes=3 * GiB,
            peak_working_set_bytes=4 * GiB,
            seconds=900.0,
            fresh_start=True,
        )
    ]
    path = tmp_path / "range_profile.parquet"
    pq.write_table(profile_table(recs), path)
    return path


@pytest.fixture
def http_root(profile_file):
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(profile_file.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_L35_local_path(profile_file):
    prev = load_previous_profile(str(profile_file))
    assert prev.index.lookup(20000).peak_anon_bytes == 3 * GiB and prev.warning is None


def test_L35_http_url(http_root):
    prev = load_previous_profile(f"{http_root}/range_profile.parquet")
    assert len(prev.index) == 1 and prev.seconds_by_key == {"0000016001-0000032000": 900.0}


@pytest.mark.parametrize("spec", ["", None, "   "])
def test_L35_empty_spec_is_an_unprofiled_mission(spec):
    prev = load_previous_profile(spec)
    assert prev.index is None and "no previous profile" in prev.warning


def test_L35_a_given_profile_missing_unreachable_or_empty_is_refused_naming_it(tmp_path, http_root):
    """A typo'd URL once ran a whole mission unprofiled on a warning nobody read."""
    nope = str(tmp_path / "nope.parquet")
    with pytest.raises(ProfileUnavailable, match=f"previous profile {re.escape(nope)} does not exist"):
        load_previous_profile(nope)
    with pytest.raises(ProfileUnavailable, match=f"{http_root}/nope.parquet is missing or unreachable"):
        load_previous_profile(f"{http_root}/nope.parquet")
    closed = "http://127.0.0.1:9/range_profile.parquet"  # nothing listens on port 9: one GET, refused as such
    with pytest.raises(ProfileUnavailable, match=f"{re.escape(closed)} is unreachable .*Cannot connect"):
        load_previous_profile(closed)
    (tmp_path / "empty.parquet").write_bytes(b"")
    with pytest.raises(ProfileUnavailable, match="empty.parquet is empty"):
        load_previous_profile(str(tmp_path / "empty.parquet"))


def test_L35_not_parquet_is_refused(tmp_path):
    bad = tmp_path / "p.parquet"
    bad.write_text("not a table")
    with pytest.raises(ProfileRefused, match="not a Parquet table"):
        load_previous_profile(str(bad))


def test_L34_hostile_profile_values_are_left_out_row_by_row_and_the_plan_stays_sane(tmp_path, caplog):
    """A negative peak once sized a negative memory request that crashed every restart at submit."""
    import math

    import pyarrow as pa

    from catchup_assets.core.plan.config import MissionConfig
    from catchup_assets.core.plan.ranges import MissionSpan
    from catchup_assets.mission.plan import prepare

    rows = [
        {
            "range_key": "0000000001-0000016000",
            "last_ledger": 16000,
            "peak_anon_bytes": -5 * GiB,
            "peak_working_set_bytes": GiB,
            "seconds": 100.0,
        },
        {
            "range_key": "0000016001-0000032000",
            "last_ledger": None,
            "peak_anon_bytes": GiB,
            "peak_working_set_bytes": GiB,
            "seconds": 100.0,
        },
        {
            "range_key": "0000032001-0000048000",
            "last_ledger": 48000,
            "peak_anon_bytes": 2 * GiB,
            "peak_working_set_bytes": -1,
            "seconds": math.nan,
        },
        {
            "range_key": "0000048001-0000064000",
            "last_ledger": 64000,
            "peak_anon_bytes": 3 * GiB,
            "peak_working_set_bytes": 3 * GiB,
            "seconds": math.inf,
        },
    ]
    path = tmp_path / "hostile.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    previous = load_previous_profile(str(path))
    assert [(m.last_ledger, m.peak_anon_bytes) for m in map(previous.index.lookup, (16000, 48000, 64000))] == [
        (48000, 2 * GiB),  # the negative peak's row is unmeasured: it takes the nearest measured above (L25)
        (48000, 2 * GiB),
        (64000, 3 * GiB),
    ]
    assert previous.index.lookup(48000).seconds is None and previous.index.lookup(48000).peak_working_set_bytes is None
    for field in ("peak_anon_bytes", "last_ledger", "seconds", "peak_working_set_bytes"):
        assert field in caplog.text
    cfg = MissionConfig(
        "m1", MissionSpan(1, 64000), str(tmp_path / "s"), previous_profile=str(path), order="longest-first"
    )
    plan = prepare(cfg).plan.to_pylist()
    assert all(r["memory_request_bytes"] > 0 for r in plan)


@pytest.mark.parametrize("drip", [False, True])
def test_L35_a_server_that_never_answers_or_drips_is_given_up_on_in_bounded_time(drip):
    """Once a silent URL held a launch for 605 s and a dripping one for 302 s."""
    import socket
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        if drip:  # headers promise a body that comes a byte at a time
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set() and not stop.wait(0.2):
                try:
                    conn.sendall(b"x")
                except OSError:
                    break
        stop.wait(30)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    started = time.monotonic()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/p.parquet"
    try:
        with pytest.raises(ProfileUnavailable, match=f"{re.escape(url)} (is|is missing or) unreachable"):
            load_previous_profile(url, timeout=2.0)
    finally:
        stop.set()
        server.close()
    assert time.monotonic() - started < 20


def _cuts_and_flips(data: bytes) -> list[bytes]:
    """Every 97th truncation of a real profile, a byte flipped every 7 bytes, and a few non-files."""
    cuts = [data[:n] for n in range(0, len(data), 97)]
    flips = [data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :] for i in range(0, len(data), 7)]
    return [*cuts, *flips, b"", b"PAR1", b"PAR1" + b"\0" * 64 + b"PAR1", b"not parquet at all"]


def test_bytes_that_are_not_a_table_are_refused_as_such_never_with_another_error(profile_file):
    # What pyarrow's reader raises varies with the damage (ArrowInvalid, ArrowNotImplementedError, a plain
    # OSError from thrift or zstd, a UnicodeDecodeError): all of it is one error that names what the reader found.
    refused = 0
    for data in _cuts_and_flips(profile_file.read_bytes()):
        try:
            parse_table(data)
        except NotATable as exc:
            assert isinstance(exc, StateError) and isinstance(exc, ValueError) and str(exc)
            refused += 1
    assert refused > 10

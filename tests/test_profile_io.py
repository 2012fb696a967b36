"""The previous profile from a path or a URL (L35)."""

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest

from catchup_assets.profile import profile_table
from catchup_assets.profile_io import ProfileRefused, load_previous_profile
from catchup_assets.records import AttemptRecord

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


def test_L35_missing_or_unreachable_is_a_warning_not_a_crash(tmp_path, http_root):
    assert "does not exist" in load_previous_profile(str(tmp_path / "nope.parquet")).warning
    gone = load_previous_profile(f"{http_root}/nope.parquet")
    assert gone.index is None and gone.warning
    closed = load_previous_profile("http://127.0.0.1:9/range_profile.parquet")  # nothing listens on port 9
    assert closed.index is None and "missing or unreachable" in closed.warning


def test_L35_not_parquet_is_refused(tmp_path):
    bad = tmp_path / "p.parquet"
    bad.write_text("not a table")
    with pytest.raises(ProfileRefused, match="not a Parquet table"):
        load_previous_profile(str(bad))

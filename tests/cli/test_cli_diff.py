"""`catchup-assets diff --root ROOT A B`: two missions' profiles by ledger band, from their storage.

The missions are written the way a mission writes them: attempt records with done marks, the
profile built from them, mission.json with the stellar-core image.
"""

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catchup_assets.cli.main import run
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.saved import save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

GiB = 1024**3
BAND = 5_000_000
KEYS = [f"{i * BAND + 1:010d}-{(i + 1) * BAND:010d}" for i in range(3)]
A_IMAGE = {"image": "stellar/stellar-core:22.0.0", "tag": "22.0.0", "digest": None}
B_IMAGE = {"image": "stellar/stellar-core:23.0.0@sha256:" + "cd" * 32, "tag": "23.0.0", "digest": "sha256:" + "cd" * 32}

# (range, [(outcome, request GiB, peak GiB, seconds)]) per mission. A ran unprofiled: 12 GiB each, the
# middle range OOMed and climbed to 18. B was sized from A; its third range grew and OOMed.
MISSIONS = {
    "m-a": (
        A_IMAGE,
        {
            KEYS[0]: [("ok", 12, 2, 600)],
            KEYS[1]: [("oom", 12, 12, 300), ("ok", 18, 14, 3600)],
            KEYS[2]: [("disrupted", 12, 3, 100), ("ok", 12, 3, 1200)],
        },
    ),
    "m-b": (
        B_IMAGE,
        {
            KEYS[0]: [("ok", 3.5, 2, 600)],
            KEYS[1]: [("ok", 18.5, 14, 3700)],
            KEYS[2]: [("oom", 4.75, 4.75, 100), ("ok", 7, 5, 1300)],
        },
    ),
}


def write_mission(root, name, image, attempts) -> None:
    store = Store(root)
    save_mission(store, MissionConfig(name, MissionSpan(1, 3 * BAND, BAND), str(root)), core_image=image)
    (root / name / "plan.parquet").write_bytes(b"")  # planned (the diff reads no plan)
    records = RecordStore(store, name)
    for key, chain in attempts.items():
        for n, (outcome, request, peak, seconds) in enumerate(chain, start=1):
            rec = AttemptRecord(
                name,
                key,
                n,
                outcome=outcome,
                started_at=1000.0 * n,
                finished_at=1000.0 * n + seconds,
                seconds=seconds,
                peak_anon_bytes=int(peak * GiB),
                fresh_start=True,
                memory_request_bytes=int(request * GiB),
                memory_limit_bytes=int(request * GiB),
            )
            records.write(rec)
            records.mark_done(key, n)
    build_profile(str(root), name)


@pytest.fixture
def root(tmp_path):
    for name, (image, attempts) in MISSIONS.items():
        write_mission(tmp_path, name, image, attempts)
    return tmp_path


def diff(root, *args) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = run(["diff", "--root", str(root), *args])
        except SystemExit as exc:  # argparse refusals
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def band_row(stdout: str, band: str) -> dict[str, str]:
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["band", "ranges"])
    columns = re.split(r"\s{2,}", lines[header].strip())
    for line in lines[header + 1 :]:
        cells = line.split()
        if cells and cells[0] == band:
            return dict(zip(columns, cells, strict=True))
    raise AssertionError(f"no band {band} in:\n{stdout}")


def test_diff_prints_the_band_table_the_regressions_and_both_images(root):
    rc, out, err = diff(root, "m-a", "m-b")
    assert rc == 0, err
    assert f"A  m-a  stellar-core {A_IMAGE['image']}" in out
    assert f"B  m-b  stellar-core {B_IMAGE['image']}" in out
    assert "matched by key: 3 ranges" in out and "matched by band: 0 ranges of A, 0 of B" in out
    assert "left out: none" in out
    first, second, third = (band_row(out, b) for b in ("0-5M", "5-10M", "10-15M"))
    # Equal peaks, and the memory requested dropped: 12 -> 3.5, (12 + 18) -> 18.5; the reclaimed
    # attempt of the third range is not the sizing's and is left out.
    assert (first["peak B/A med"], first["req A"], first["req B"], first["req B/A"]) == ("1.00", "12.0", "3.5", "0.29")
    assert (second["req A"], second["req B"], second["req B/A"], second["OOM A"]) == ("30.0", "18.5", "0.62", "1")
    assert (third["req A"], third["req B"], third["OOM B"], third["regressed"]) == ("12.0", "11.8", "1", "1")
    assert third["peak B/A max"] == "1.67"
    assert band_row(out, "all")["req B/A"] == "0.62"
    assert "regressions (peak or seconds past 1.25x, and new OOMs): 2" in out
    regressions = out[out.index("regressions (") :]
    assert re.search(rf"{KEYS[2]}\s+peak\s+3\.00 GiB\s+5\.00 GiB\s+1\.67", regressions)
    assert re.search(rf"{KEYS[2]}\s+new_oom\s+0 OOM\s+1 OOM", regressions)


def test_diff_options_bands_threshold_scale_and_the_parquet_it_writes(root, tmp_path):
    out_file = tmp_path / "diff.parquet"
    rc, out, err = diff(root, "m-a", "m-b", "--band-ledgers", "15000000", "--threshold", "2", "--out", str(out_file))
    assert rc == 0, err
    assert band_row(out, "0-15M")["ranges"] == "3"
    assert "regressions (peak or seconds past 2x, and new OOMs): 1" in out  # the new OOM only
    table = pq.read_table(out_file)
    assert table.num_rows == 1 and table.column("requested_ratio")[0].as_py() == pytest.approx(33.75 / 54)
    assert table.schema.metadata[b"catchup_assets.diff.b"] == b"m-b"
    rc, out, _ = diff(root, "m-a", "m-b", "--memory-scale", "0.005")
    assert band_row(out, "0-5M")["req A"] == "2,400.0"  # 12 GiB measured x 200


def test_an_older_mission_without_a_recorded_image_is_said_unknown(root):
    doc = root / "m-a" / "mission.json"
    doc.write_text(re.sub(r',\s*"core_image": \{[^}]*\}', "", doc.read_text()))
    assert "core_image" not in doc.read_text()
    rc, out, _ = diff(root, "m-a", "m-b")
    assert rc == 0 and "A  m-a  stellar-core unknown (not recorded)" in out


def wrong_schema(root):
    pq.write_table(pa.table({"range_key": ["x"], "peak": [1]}), root / "m-b" / "range_profile.parquet")


@pytest.mark.parametrize(
    "args, prepare, says",
    [
        (["m-a", "m-c"], None, "B (m-c): no mission 'm-c' under"),
        (["m-a", "M 1"], None, "B (M 1): mission name 'M 1' is invalid"),
        (
            ["m-a", "m-b"],
            lambda r: (r / "m-a" / "range_profile.parquet").unlink(),
            "A (m-a): mission 'm-a' has no profile at",
        ),
        (["m-a", "m-b"], wrong_schema, "B (m-b): profile {root}/m-b/range_profile.parquet lacks column(s)"),
        (
            ["m-a", "m-b"],
            lambda r: (r / "m-a" / "range_profile.parquet").write_bytes(b"not parquet"),
            "A (m-a): profile {root}/m-a/range_profile.parquet is not a Parquet table",
        ),
        (["m-a", "m-b", "--threshold", "1"], None, "argument --threshold: '1' must be > 1"),
        (["m-a", "m-b", "--band-ledgers", "0"], None, "argument --band-ledgers: '0' must be >= 1"),
        (["m-a"], None, "the following arguments are required: B"),
    ],
)
def test_bad_input_is_refused_naming_the_argument_and_the_file(root, args, prepare, says):
    if prepare:
        prepare(root)
    rc, out, err = diff(root, *args)
    assert rc == 2
    assert says.format(root=root) in err
    assert "Traceback" not in err

"""`catchup-assets diff` and `profile_diff` between a grid mission and a mission cut to its profile (issue 37 item 2).

A ran the uniform grid. B is cut from A's profile as `lengths: profile` cuts it (core/plan/cut.py's
`profile_cut`, what the planner calls): the slow ranges near the tip split, the fast old ones
merged, the rest keeping their grid keys. Both replay one history (a range's seconds: one setup
plus the replay of its ledgers; its peak: the highest of the grid ranges it covers), written the
way a mission writes it: attempt records with done marks, the profile built from them.
"""

import contextlib
import io
import re

import dagster as dg
import pytest

from catchup_assets.cli.main import run
from catchup_assets.core.aggregate.band_match import band_label
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.cut import profile_cut
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.measures import measures_from_rows
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.defs.assets.profile_diff import profile_diff
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table

GiB = 1024**3
L = 16_000  # ledgers per grid range
SPAN = MissionSpan(1, 24 * L, L)
GRID = plan_ranges(SPAN)
BAND = 4 * L  # six bands of four grid ranges
SLOTS = 8  # the tip's range is longer than the work per slot: the cut splits it
SETUP = 60.0


def rate(i: int) -> float:
    return 0.002 * 1.25**i  # replay seconds per ledger of grid range i: 0.03 s/ledger at the tip


def replay(first: int, last: int) -> tuple[float, float]:
    """Seconds and peak (GiB) of first..last on this history."""
    seconds, peak = SETUP, 0.0
    for i, g in enumerate(GRID):
        shared = min(last, g.last) - max(first, g.first) + 1
        if shared > 0:
            seconds += rate(i) * shared
            peak = max(peak, 1 + 0.25 * i)
    return seconds, peak


def write_mission(root, name, ranges) -> None:
    store = Store(root)
    save_mission(store, MissionConfig(name, SPAN, str(root)))
    (root / name / "plan.parquet").write_bytes(b"")  # planned (the diff reads no plan)
    records = RecordStore(store, name)
    for r in ranges:
        seconds, peak = replay(r.first, r.last)
        rec = AttemptRecord(
            name,
            r.key,
            1,
            outcome="ok",
            started_at=1000.0,
            finished_at=1000.0 + seconds,
            seconds=seconds,
            setup_seconds=SETUP,
            peak_anon_bytes=int(peak * GiB),
            fresh_start=True,
            memory_request_bytes=int((peak + 1) * GiB),
            memory_limit_bytes=int((peak + 1) * GiB),
        )
        records.write(rec)
        records.mark_done(r.key, 1)
    build_profile(str(root), name)


@pytest.fixture
def missions(tmp_path):
    write_mission(tmp_path, "m-grid", GRID)
    rows = read_table(Store(tmp_path), layout.profile("m-grid")).to_pylist()
    cut = profile_cut(measures_from_rows(rows), SPAN, SLOTS)
    assert cut.cut > 0 and cut.merged > 0  # both: keys the grid lacks, and grid keys gone
    write_mission(tmp_path, "m-cut", cut.ranges)
    # The plan's copy of the profile B was sized from: what profile_diff compares B against.
    (tmp_path / layout.previous_profile("m-cut")).write_bytes((tmp_path / layout.profile("m-grid")).read_bytes())
    return tmp_path, cut


def diff(root, *args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run(["diff", "--root", str(root), *args])
    return rc, out.getvalue(), err.getvalue()


def band_rows(stdout: str) -> dict[str, dict[str, str]]:
    """The printed band table: each band's cells by column name, in the order printed."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["band", "ranges"])
    columns = re.split(r"\s{2,}", lines[header].strip())
    rows = {}
    for line in lines[header + 1 :]:
        if not line.strip() or line.startswith("memory in"):
            break
        cells = line.split()
        rows[cells[0]] = dict(zip(columns, cells, strict=True))
    return rows


def expected(cut) -> dict[str, tuple]:
    """Per band: (by key, A by band, B by band, A's seconds per ledger, B's, A's peak GiB, B's, whether a
    range whose key the other lacks covers some of it).

    A range both have counts whole in the band of its last ledger; one whose key the other lacks is
    counted there too, while its seconds, ledgers and peak count in every band it covers, the
    seconds and ledgers pro rata."""
    shared_keys = {g.key for g in GRID} & {r.key for r in cut.ranges}
    out = {}
    for i in range(len(GRID) // 4):
        lo, hi = i * BAND + 1, (i + 1) * BAND
        side, alone_here = {}, False
        for name, ranges in (("a", GRID), ("b", cut.ranges)):
            seconds = ledgers = peak = 0.0
            for r in ranges:
                if r.key in shared_keys:
                    share = 1.0 if lo <= r.last <= hi else 0.0
                else:
                    share = max(0, min(r.last, hi) - max(r.first, lo) + 1) / (r.last - r.first + 1)
                alone_here |= share > 0 and r.key not in shared_keys
                if share:
                    t, p = replay(r.first, r.last)
                    seconds, ledgers, peak = seconds + t * share, ledgers + (r.last - r.first + 1) * share, max(peak, p)
            alone = sum(1 for r in ranges if lo <= r.last <= hi and r.key not in shared_keys)
            side[name] = (alone, seconds / ledgers, peak)
        keyed = sum(1 for g in GRID if lo <= g.last <= hi and g.key in shared_keys)
        out[band_label(i, BAND)] = (
            keyed,
            side["a"][0],
            side["b"][0],
            side["a"][1],
            side["b"][1],
            side["a"][2],
            side["b"][2],
            alone_here,
        )
    return out


def test_issue37_diff_of_a_grid_and_a_cut_mission_prints_every_band_matched_by_key_and_by_band(missions):
    root, cut = missions
    rc, out, err = diff(root, "m-grid", "m-cut", "--band-ledgers", str(BAND))
    assert rc == 0, err
    want = expected(cut)
    by_key = sum(w[0] for w in want.values())
    a_band, b_band = sum(w[1] for w in want.values()), sum(w[2] for w in want.values())
    assert by_key == len({g.key for g in GRID} & set(cut.keys)) > 0 and a_band > 0 and b_band > 0
    assert f"matched by key: {by_key} ranges" in out
    assert f"matched by band: {a_band} ranges of A, {b_band} of B" in out
    assert "left out: none" in out
    rows = band_rows(out)
    assert list(rows) == [*want, "all"]  # every band of the span, then the totals
    for band, (keyed, in_a, in_b, spl_a, spl_b, peak_a, peak_b, alone_here) in want.items():
        row = rows[band]
        assert (row["ranges"], row["by band A"], row["by band B"]) == (str(keyed), str(in_a), str(in_b)), band
        # Seconds per ledger on each side; B/A is what the cut's setups cost (split) or saved (merged).
        assert (row["ms/ledger A"], row["ms/ledger B"]) == (f"{spl_a * 1000:.3g}", f"{spl_b * 1000:.3g}"), band
        assert row["time B/A"] == f"{spl_b / spl_a:.2f}", band
        assert (row["peak A"], row["peak B"]) == (f"{peak_a:.1f}", f"{peak_b:.1f}"), band  # maxed
        # A sum of requests over ranges cut otherwise counts other pods: no ratio unless all matched by key.
        assert (row["req B/A"] == "-") is alone_here, band
    total = rows["all"]
    assert (total["ranges"], total["by band A"], total["by band B"]) == (str(by_key), str(a_band), str(b_band))
    assert "regressions (peak or seconds past 1.25x, and new OOMs): 0" in out


def test_issue37_profile_diff_metadata_counts_the_ranges_matched_by_key_and_by_band(missions):
    root, cut = missions
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("missions", ["m-cut"])
    result = dg.materialize(
        [profile_diff],
        partition_key="m-cut",
        instance=instance,
        resources={"catchup": CatchupResource(storage_root=str(root))},
        run_config={"ops": {"profile_diff": {"config": {"band_ledgers": BAND}}}},
    )
    assert result.success
    meta = result.asset_materializations_for_node("profile_diff")[0].metadata
    want = expected(cut)
    assert (meta["a_mission"].value, meta["b_mission"].value) == ("m-grid", "m-cut")
    assert meta["ranges_matched_by_key"].value == meta["ranges_compared"].value == sum(w[0] for w in want.values())
    assert meta["ranges_matched_by_band"].value == {
        "a": sum(w[1] for w in want.values()),
        "b": sum(w[2] for w in want.values()),
    }
    text = meta["bands"].value
    assert [band for band in want if re.search(rf"^\| {re.escape(band)} \|", text, re.M)] == list(want)
    assert "requested_ratio" not in meta  # a sum of requests over ranges cut otherwise is no ratio
    assert meta["seconds_ratio"].value == pytest.approx(
        sum(replay(r.first, r.last)[0] for r in cut.ranges) / sum(replay(g.first, g.last)[0] for g in GRID), abs=0.01
    )

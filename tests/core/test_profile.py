"""Chain aggregation of attempt records into profile rows (L21, L22, L25, L26)."""

import pytest

from catchup_assets.core.aggregate.profile_table import REQUIRED_COLUMNS, check_profile_columns, profile_rows, range_row
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.tables import profile_table

GiB = 1024**3
KEY = "0000016001-0000032000"


def rec(
    attempt, outcome, anon=None, ws=None, seconds=None, fresh=None, limit=None, tx=None, start=None, end=None, key=KEY
):
    return AttemptRecord(
        "m1",
        key,
        attempt,
        outcome,
        peak_anon_bytes=anon,
        peak_working_set_bytes=ws,
        seconds=seconds,
        fresh_start=fresh,
        memory_limit_bytes=limit,
        tx_apply_count=tx,
        tx_apply_seconds=None if tx is None else tx / 1000,
        started_at=start,
        finished_at=end,
    )


@pytest.mark.parametrize(
    "attempts, anon, seconds, tx, chain",
    [
        # single fresh attempt
        ([rec(1, "ok", 2 * GiB, 3 * GiB, 100, True, tx=50)], 2 * GiB, 100, 50, 1),
        # L21: disrupted during download (peak), resumed leg peaks lower: max over the chain
        (
            [rec(1, "disrupted", 9 * GiB, None, 300, True, tx=10), rec(2, "ok", 2 * GiB, None, 200, False, tx=90)],
            9 * GiB,
            500,
            100,
            2,
        ),
        # L21: a fresh start supersedes what came before (peaks, seconds, tx)
        (
            [rec(1, "disrupted", 9 * GiB, None, 300, True, tx=10), rec(2, "ok", 2 * GiB, None, 200, True, tx=90)],
            2 * GiB,
            200,
            90,
            1,
        ),
        # L21: ...except an OOM's limit, which stays a lower bound
        (
            [
                rec(1, "oom", 5 * GiB, None, 50, True, limit=6 * GiB),
                rec(2, "ok", 3 * GiB, None, 400, True, limit=9 * GiB, tx=7),
            ],
            6 * GiB,
            400,
            7,
            1,
        ),
        # L22: three-leg chain sums compute seconds and tx; an unknown leg (no log) stays in the chain
        (
            [
                rec(1, "interrupted", 4 * GiB, None, 10, True, tx=1),
                rec(2, "unknown", None, None, 20, None),
                rec(3, "ok", 1 * GiB, None, 30, False, tx=3),
            ],
            4 * GiB,
            60,
            4,
            3,
        ),
        # already-complete leg (LCL >= target) continues the chain before it
        (
            [rec(1, "disrupted", 7 * GiB, None, 500, True, tx=100), rec(2, "ok", GiB // 4, None, 2, False)],
            7 * GiB,
            502,
            100,
            2,
        ),
    ],
)
def test_L21_L22_chain_aggregation(attempts, anon, seconds, tx, chain):
    row = range_row(attempts)
    assert (row["peak_anon_bytes"], row["seconds"], row["tx_apply_count"], row["chain_attempts"]) == (
        anon,
        seconds,
        tx,
        chain,
    )
    assert row["completed"] is True and row["attempts"] == len(attempts)


def test_L22_wall_seconds_cover_the_gaps_between_attempts():
    row = range_row(
        [
            rec(1, "disrupted", GiB, None, 100, True, start=1000, end=1100),
            rec(2, "ok", GiB, None, 100, False, start=1500, end=1600),
        ]
    )
    assert row["seconds"] == 200 and row["wall_seconds"] == 600


@pytest.mark.parametrize(
    "legs, seconds, estimated",
    [
        # the seed's bug: a leg whose pod vanished with its node dropped out of the sum (200 + 300 -> 300)
        ([(1, "disrupted", 200.0, True, True), (2, "ok", 300.0, False, False)], 500.0, True),
        ([(1, "disrupted", 200.0, False, True), (2, "ok", 300.0, False, False)], 500.0, False),
        # never seen running: nothing to estimate from; the sum is a lower bound and says so
        ([(1, "disrupted", None, None, True), (2, "ok", 300.0, False, False)], 300.0, True),
        # an estimated leg before a fresh start is not in the chain
        ([(1, "disrupted", 200.0, True, True), (2, "ok", 300.0, False, True)], 300.0, False),
    ],
)
def test_L22_a_vanished_leg_s_estimated_seconds_are_summed_and_marked(legs, seconds, estimated):
    attempts = [
        AttemptRecord(
            "m1", KEY, a, outcome, peak_anon_bytes=GiB, seconds=secs, seconds_estimated=est, fresh_start=fresh
        )
        for a, outcome, secs, est, fresh in legs
    ]
    row = range_row(attempts)
    assert (row["seconds"], row["seconds_estimated"]) == (seconds, estimated)


def test_condemned_oom_range_keeps_its_floor():
    row = range_row([rec(a, "oom", None, None, 10, True, limit=(a + 3) * GiB) for a in range(1, 6)])
    assert row["peak_anon_bytes"] == 8 * GiB and row["oom_count"] == 5 and row["completed"] is False


@pytest.mark.parametrize(
    "attempts, anon",
    [
        # a corrupt archive fails in half a second at a fraction of the range's memory: no row
        ([rec(1, "failed", GiB // 8, GiB // 4, 0.5, True)], None),
        # reclaimed, then failed: the reclaimed leg's peak is as partial as the failure's
        ([rec(1, "disrupted", 6 * GiB, None, 300, True), rec(2, "failed", GiB, None, 1, False)], None),
        # still in flight when the run stopped: a partial chain sizes nothing either
        ([rec(1, "disrupted", 6 * GiB, None, 300, True)], None),
        # condemned after OOMs: only the floor, never the peaks its attempts reached
        ([rec(1, "oom", 7 * GiB, None, 50, True, limit=6 * GiB), rec(2, "failed", GiB, None, 1, True)], 6 * GiB),
    ],
)
def test_only_a_completed_chain_measures_a_range_else_its_oom_floor(attempts, anon):
    row = range_row(attempts)
    if anon is None:
        assert row is None
    else:
        assert row["peak_anon_bytes"] == row["oom_floor_bytes"] == anon and row["completed"] is False
        assert row["peak_working_set_bytes"] is None and row["seconds"] is None and row["tx_apply_count"] is None


def test_an_older_profile_s_incomplete_row_sizes_by_its_oom_floor_or_not_at_all(caplog):
    """A profile written before incomplete chains were left out may carry an early failure's peak."""
    from catchup_assets.core.size.measures import measures_from_rows

    early = {"range_key": KEY, "last_ledger": 32000, "peak_anon_bytes": GiB // 8, "completed": False}
    floor = {**early, "last_ledger": 48000, "oom_floor_bytes": 6 * GiB, "peak_anon_bytes": 7 * GiB}
    done = {**early, "last_ledger": 64000, "completed": True, "seconds": 5.0}
    measures = measures_from_rows([early, floor, done])
    assert [(m.last_ledger, m.peak_anon_bytes, m.seconds) for m in measures] == [(48000, 6 * GiB, None),
                                                                                (64000, GiB // 8, 5.0)]  # fmt: skip
    assert "never completed and never OOMed" in caplog.text


def test_L25_unmeasured_ranges_are_left_out_per_record():
    measured = [
        rec(1, "ok", GiB, None, 10, True, key="0000000001-0000016000"),
        rec(1, "ok", 3 * GiB, None, 10, True, key="0000032001-0000048000"),
    ]
    junk = [rec(1, "ok", None, None, 10, True, key=KEY), rec(1, None, key="0000048001-0000064000")]
    rows, unmeasured = profile_rows(measured + junk)
    assert [r["range_key"] for r in rows] == ["0000000001-0000016000", "0000032001-0000048000"]
    assert unmeasured == [KEY, "0000048001-0000064000"]


def test_L26_profile_table_carries_every_field_the_sizer_reads():
    table = profile_table([rec(1, "ok", GiB, 2 * GiB, 10, True)])
    check_profile_columns(table.column_names, "test")
    row = table.to_pylist()[0]
    assert all(row[c] is not None for c in REQUIRED_COLUMNS)


def test_L26_profile_missing_a_sizing_column_is_refused_with_its_name():
    table = profile_table([rec(1, "ok", GiB, 2 * GiB, 10, True)]).drop(["peak_working_set_bytes"])
    with pytest.raises(ValueError, match="peak_working_set_bytes"):
        check_profile_columns(table.column_names, "prev.parquet")


def _leg(attempt, outcome, seconds, setup, fresh):
    return AttemptRecord(
        "m1", KEY, attempt, outcome, peak_anon_bytes=1, seconds=seconds, fresh_start=fresh, setup_seconds=setup
    )


@pytest.mark.parametrize(
    "legs, setup, replay",
    [
        ([_leg(1, "ok", 1000.0, 300.0, True)], 300.0, 700.0),
        # A resumed leg pays only its own short setup; the chain's setup is its fresh leg's.
        ([_leg(1, "disrupted", 400.0, 300.0, True), _leg(2, "ok", 700.0, 5.0, False)], 300.0, 795.0),
        # The fresh leg's log said nothing: no setup; replay from the legs that had a reading.
        ([_leg(1, "disrupted", 400.0, None, True), _leg(2, "ok", 700.0, 5.0, False)], None, 695.0),
        ([_leg(1, "ok", 1000.0, None, True)], None, None),  # an older record: both unknown
        # A fresh start supersedes the chain before it.
        ([_leg(1, "disrupted", 50.0, 40.0, True), _leg(2, "ok", 900.0, 250.0, True)], 250.0, 650.0),
    ],
)
def test_issue25_profile_setup_from_the_fresh_leg_replay_summed(legs, setup, replay) -> None:
    row = range_row(legs)
    assert (row["setup_seconds"], row["replay_seconds"]) == (setup, replay)
    assert profile_table(legs).column("replay_seconds").to_pylist() == [replay]


def found_complete(attempt, seconds=0.2, anon=GiB // 8):
    """A leg that resumed on a volume already at the range's end (`RESUME: ... already complete`)."""
    return AttemptRecord(
        "m1", KEY, attempt, "ok", peak_anon_bytes=anon, seconds=seconds, fresh_start=False, resumed_from_ledger=32000
    )


@pytest.mark.parametrize(
    "attempts, want",
    [
        # the work's record kept: the range is what that leg measured, not 120 + 0.2 s
        (
            [rec(1, "ok", 3 * GiB, None, 120, True, tx=500, start=10, end=130), found_complete(2)],
            (3 * GiB, 120, 500, 1),
        ),
        # the work's leg ended after the catchup did (its pod reclaimed at upload): still the measure
        ([rec(1, "disrupted", 7 * GiB, None, 100, True, tx=300), found_complete(2)], (7 * GiB, 100, 300, 1)),
        # a resumed chain before it: summed as ever, the found-complete leg left out
        (
            [
                rec(1, "disrupted", 4 * GiB, None, 60, True, tx=40),
                rec(2, "ok", GiB, None, 30, False, tx=60),
                found_complete(3),
            ],
            (4 * GiB, 90, 100, 2),
        ),
        # the work's records lost (its attempt deleted unrecorded, then its id reused): unmeasured, never 0.2 s
        ([found_complete(1)], None),
        ([rec(1, None, 2 * GiB, start=10), found_complete(2)], None),  # only a flushed, unfinished record before it
    ],
)
def test_issue36_item9_a_range_found_complete_keeps_its_earlier_chain_s_measurements(attempts, want):
    row = range_row(attempts)
    if want is None:
        assert row is None
        return
    assert (row["peak_anon_bytes"], row["seconds"], row["tx_apply_count"], row["chain_attempts"]) == want
    assert row["completed"] is True and row["attempts"] == len(attempts)

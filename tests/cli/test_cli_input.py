"""Numbers on the command line are refused where they enter, naming the argument (L34)."""

import pytest

from catchup_assets.cli.main import run


@pytest.mark.parametrize(
    "argv, named",
    [
        (["plan", "--profile", "p.parquet", "--what-if", "0"], "--what-if"),
        (["plan", "--profile", "p.parquet", "--what-if", "-1"], "--what-if"),
        (["plan", "--profile", "p.parquet", "--what-if", "inf"], "--what-if"),
        (["plan", "--profile", "p.parquet", "--what-if", "nan"], "--what-if"),
        (["plan", "--profile", "p.parquet", "--parallelism", "0"], "--parallelism"),
        (["plan", "--profile", "p.parquet", "--parallelism", "1e3"], "--parallelism"),
        (["plan", "--profile", "p.parquet", "--ledgers-per-range", "0"], "--ledgers-per-range"),
        (["plan", "--profile", "p.parquet", "--overlap", "-5"], "--overlap"),
        (["demo", "--speed", "inf"], "--speed"),
        (["demo", "--speed", "0"], "--speed"),
        (["demo", "--disruption-rate", "nan"], "--disruption-rate"),
        (["demo", "--ranges", "0"], "--ranges"),
        (["demo", "--metrics-port", "-1"], "--metrics-port"),
        (["workload", "--out", "w.parquet", "--ranges", "-1"], "--ranges"),
        # issue 24 item 7: once refused as a bad last_ledger, not as the flag given
        (["workload", "--out", "w.parquet", "--ranges", str(10**12)], "--ranges"),
        (["demo", "--ranges", str(10**12)], "--ranges"),
        (["demo", "--metrics-port", "70000"], "--metrics-port"),
        (["demo", "--console-port", "-1"], "--console-port"),  # issue 46
        (["demo", "--console-port", "70000"], "--console-port"),
        (["plan", "--profile", "p.parquet", "--ledgers-per-range", "100"], "--ledgers-per-range"),
        (["plan", "--profile", "p.parquet", "--first-ledger", str(2**40)], "--first-ledger"),
        (["plan", "--profile", "p.parquet", "--last-ledger", str(2**62)], "--last-ledger"),
        (["fit-tiers", "--profile", "p.parquet", "--max-tiers", "1000000"], "--max-tiers"),
        (["fit-tiers", "--profile", "p.parquet", "--step-gib", "1e-12"], "--step-gib"),
    ],
)
def test_L34_a_bad_number_is_refused_naming_its_argument(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_:
        run(argv)
    assert exit_.value.code == 2
    assert f"argument {named}" in capsys.readouterr().err


@pytest.fixture
def profile(tmp_path) -> str:
    """A measured profile of four 16000-ledger ranges."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from catchup_assets.core.values.ledger_range import format_key
    from catchup_assets.store.tables import PROFILE_SCHEMA

    rows = [
        {"range_key": format_key(i * 16000 + 1, (i + 1) * 16000), "first_ledger": i * 16000 + 1}
        | {"last_ledger": (i + 1) * 16000, "peak_anon_bytes": 2**30, "peak_working_set_bytes": 2**30, "seconds": 60.0}
        for i in range(4)
    ]
    path = tmp_path / "range_profile.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), path)
    return str(path)


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--overlap", str(10**12)], "--overlap 1000000000000 must be below --ledgers-per-range 16000"),
        (["--overlap", "16000"], "--overlap 16000 must be below --ledgers-per-range 16000"),
        (["--first-ledger", "64001"], "--first-ledger 64001 is above the profile's highest ledger 64000"),
        (["--first-ledger", "5000", "--last-ledger", "10"], "--first-ledger 5000 is above --last-ledger 10"),
        (["--ledgers-per-range", "64", "--overlap", "0", "--last-ledger", str(2**31)], "--ledgers-per-range: .*"),
    ],
)
def test_L34_flags_checked_together_are_refused_naming_each_flag(profile, flags, says, capsys):
    """What one flag alone cannot say (the overlap below the range length, the span) is named by the flags too."""
    import re

    assert run(["plan", "--profile", profile, *flags]) == 2
    err = capsys.readouterr().err
    assert re.search(f"catchup-assets: error: {says}", err) and "Traceback" not in err, err


def test_L35_plan_warns_of_each_skipped_row_once(tmp_path, caplog):
    """`plan --profile` read the profile twice (its own check, then the plan's), and warned of each row twice."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from catchup_assets.core.values.ledger_range import format_key
    from catchup_assets.store.tables import PROFILE_SCHEMA

    def row(i: int, **changed) -> dict:
        first, last = i * 16000 + 1, (i + 1) * 16000
        return {"range_key": format_key(first, last), "first_ledger": first, "last_ledger": last,
                "peak_anon_bytes": 2**26, "seconds": 10.0, "mission": "m0"} | changed  # fmt: skip

    path = tmp_path / "range_profile.parquet"
    rows = [row(i) for i in range(10)] + [row(2), row(10, last_ledger=2**62)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), path)
    assert run(["plan", "--profile", str(path), "--parallelism", "4"]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert sum("row 12 (0000160001-0000176000) skipped: last_ledger" in m for m in warned) == 1, warned
    assert sum("1 range key(s) repeated" in m for m in warned) == 1, warned

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
    ],
)
def test_L34_a_bad_number_is_refused_naming_its_argument(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_:
        run(argv)
    assert exit_.value.code == 2
    assert f"argument {named}" in capsys.readouterr().err

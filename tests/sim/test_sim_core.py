"""The simulated stellar-core and its cost model, driven as a real process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from catchup_assets.core.measure.logparse import iter_lines, parse_tx_apply
from catchup_assets.core.units import GiB
from catchup_assets.sim.model import range_cost

CORE = Path(sys.executable).parent / "catchup-sim-core"
FAST = {"SIM_SPEED": "20000", "SIM_MEMORY_SCALE": "0.005"}
RANGE = 16_000


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SIM_")}
    return {**base, **FAST, **extra}


def core(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CORE), *args], cwd=cwd, env=env(**extra), capture_output=True, text=True, timeout=60)


def lcl(cwd: Path) -> int:
    return json.loads((cwd / "sim-core-state.json").read_text())["lcl"]


def test_model_is_deterministic_and_seeded() -> None:
    assert range_cost(1000, 2000, seed=7) == range_cost(1000, 2000, seed=7)
    assert range_cost(1000, 2000, seed=7) != range_cost(1000, 2000, seed=8)
    assert range_cost(1000, 2000) != range_cost(1001, 2000)


def test_model_does_not_depend_on_the_process_hash_seed() -> None:
    code = "from catchup_assets.sim.model import range_cost; print(range_cost(5, 9000, 3))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": s},
            check=True,
        ).stdout
        for s in ("1", "2")
    }
    assert len(outs) == 1


def full(first: int, seed: int = 0):
    return range_cost(first, first + RANGE - 1, seed)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_model_tip_heavier_than_genesis_at_real_world_scale(seed: int) -> None:
    old, mid, bump, tip = full(1, seed), full(30_000_001, seed), full(43_000_001, seed), full(59_984_001, seed)
    for field in ("seconds_per_ledger", "peak_anon_bytes", "replay_anon_bytes", "disk_bytes", "tx_per_ledger"):
        assert getattr(old, field) < getattr(mid, field) < getattr(tip, field), field
        assert getattr(bump, field) > getattr(mid, field), field
    assert old.peak_anon_bytes < 1 * GiB and 11 * GiB < tip.peak_anon_bytes < 17 * GiB
    assert 7 * 60 < old.seconds_per_ledger * RANGE < 13 * 60
    assert 4.5 * 3600 < tip.seconds_per_ledger * RANGE < 7.5 * 3600
    for cost in (old, mid, bump, tip):
        assert cost.replay_anon_bytes < cost.peak_anon_bytes


METRIC = ("--metric", "ledger.transaction.apply")


def test_L16_offline_info_num_is_far_from_the_ledger_key(tmp_path: Path) -> None:
    missing = core(tmp_path, "offline-info")
    assert missing.returncode == 1 and "Got an exception" in missing.stderr
    assert core(tmp_path, "new-db").returncode == 0
    out = core(tmp_path, "offline-info").stdout  # the JSON alone: logs go to stderr
    assert json.loads(out)["info"]["ledger"]["num"] == 1
    lines = out.splitlines()
    at = {key: i for i, line in enumerate(lines) for key in ('"ledger"', '"num"') if key in line}
    assert at['"num"'] - at['"ledger"'] >= 40
    assert sum('"num"' in line for line in lines) == 1


def test_L16_catchup_exits_2_when_nothing_is_left_to_apply(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    assert core(tmp_path, "catchup", "640/320", *METRIC).returncode == 0
    again = core(tmp_path, "catchup", "640/320", *METRIC)
    assert again.returncode == 2 and "is not newer than last closed ledger 640 - nothing to do" in again.stderr
    assert parse_tx_apply(again.stderr.splitlines()) == (0, 0.0)
    assert lcl(tmp_path) == 640


# One line of stellar-core's log: Logging::setFmt's pattern (src/util/Logging.cpp).
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} GABCD \[(\w+) (INFO|WARNING|ERROR|FATAL)\] (.*)$")
TIMER_FIELDS = [
    "count",
    "mean rate",
    "1-minute rate",
    "5-minute rate",
    "15-minute rate",
    "min",
    "max",
    "mean",
    "stddev",
    "sum",
    "median",
    "75%",
    "95%",
    "98%",
    "99%",
    "99.9%",
]


def report_of(stderr: str) -> list[str]:
    """The messages of reportCfgMetrics' block for the tx-apply timer, header to closing blank."""
    msgs = [m.group(3) for m in map(LINE.match, stderr.splitlines()) if m and m.group(1) == "default"]
    at = msgs.index("metric 'ledger.transaction.apply':")
    end = msgs.index("", at)
    assert msgs[at - 1] == ""  # reportCfgMetrics logs an empty line before and after
    return msgs[at + 1 : end]


def test_L24_the_metric_report_is_stellar_core_s_and_only_on_request(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    silent = core(tmp_path, "catchup", "640/320")
    assert silent.returncode == 0 and "metric '" not in silent.stderr
    assert parse_tx_apply(silent.stderr.splitlines()) == (None, None)  # no --metric, no measurement
    core(tmp_path, "new-db")
    # --conf and --metric before or after the subcommand, as CommandLine.cpp accepts them.
    run = core(tmp_path, "--conf", "core.cfg", "catchup", "640/320", *METRIC)
    assert run.returncode == 0 and run.stderr.splitlines()[0].endswith("[default INFO] Config from core.cfg")
    fields = [ln for ln in report_of(run.stderr) if " = " in ln]
    # ConsoleReporter::Impl::Process(Timer&): every label right-aligned to 16, then " = ".
    assert [f[:16].strip() for f in fields] == TIMER_FIELDS
    assert all(f[16:19] == " = " for f in fields)
    assert fields[1].endswith(" calls/ms") and fields[9].endswith("ms")
    assert parse_tx_apply(run.stderr.splitlines())[0] == int(fields[0].split("=")[1])


def test_a_bad_command_line_exits_1_like_run_with_help(tmp_path: Path) -> None:
    for args in (("catchup", "640/320", "--bogus"), ("catchup",), ("catchup", "640/320", "--metric")):
        assert core(tmp_path, *args).returncode == 1, args


def test_L24_catchup_reports_the_work_of_this_process_only(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    first = core(tmp_path, "catchup", "1000/1000", *METRIC)
    assert first.returncode == 0 and lcl(tmp_path) == 1000
    assert "applying ledger 1000 " in first.stderr and "buckets" not in first.stderr
    count, seconds = parse_tx_apply(iter_lines([first.stderr.encode()]))
    cost = range_cost(2, 1000)
    assert count and count == pytest.approx(cost.tx_per_ledger * 999, abs=20)
    assert seconds == pytest.approx(0.7 * cost.seconds_per_ledger * 999)
    # A heavy range: its sum only fits in scientific notation.
    core(tmp_path, "new-db")
    heavy = core(tmp_path, "catchup", "59999999/2000", *METRIC, SIM_SPEED="1e6")
    assert heavy.returncode == 0
    assert any("  sum = " in ln and "e+" in ln for ln in heavy.stderr.splitlines())
    assert parse_tx_apply(heavy.stderr.splitlines())[1] > 100


def test_L24_some_runs_interleave_foreign_lines_deterministically(tmp_path: Path) -> None:
    def block_shape(seed: int) -> list[str]:
        core(tmp_path, "new-db")
        out = core(tmp_path, "catchup", "200/200", *METRIC, SIM_SEED=str(seed)).stderr.splitlines()
        start = next(i for i, ln in enumerate(out) if ln.endswith("metric 'ledger.transaction.apply':"))
        return [ln.split(" ", 3)[2] for ln in out[start : start + 8]]  # whose line: "[Bucket", "[default"

    shapes = {seed: block_shape(seed) for seed in range(6)}
    mixed = [s for s, shape in shapes.items() if any("[Bucket" in ln for ln in shape)]
    assert mixed and len(mixed) < len(shapes)
    assert block_shape(mixed[0]) == shapes[mixed[0]]


def test_resume_replays_from_lcl_and_fresh_start_applies_buckets(tmp_path: Path) -> None:
    assert core(tmp_path, "catchup", "640/320").returncode == 1  # no database yet
    core(tmp_path, "new-db")
    (tmp_path / "sim-core-state.json").write_text(json.dumps({"lcl": 447}))
    out = core(tmp_path, "catchup", "640/320").stderr
    assert "lastClosedLedger: 447" in out and "buckets" not in out
    core(tmp_path, "new-db")
    out = core(tmp_path, "catchup", "640/320").stderr
    assert "Applying buckets: LCL 320" in out and "applying ledger 640 " in out
    assert (tmp_path / "sim-buckets.bin").stat().st_size > 0


def test_fail_targets_fail_for_real(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    bad = core(tmp_path, "catchup", "640/320", SIM_FAIL_TARGETS="5, 640")
    assert bad.returncode == 1 and "[default FATAL] Got an exception: Invariant" in bad.stderr
    assert lcl(tmp_path) == 1


def test_exit_early_stops_at_the_named_ledger_and_still_exits_0(tmp_path: Path) -> None:
    """The broken core issue 24 item 6 guards against: it reports success short of its target."""
    core(tmp_path, "new-db")
    short = core(tmp_path, "catchup", "640/320", SIM_EXIT_EARLY="640=447")
    assert short.returncode == 0 and "* Catchup finished." in short.stderr
    assert lcl(tmp_path) == 447
    info = core(tmp_path, "offline-info")
    assert json.loads(info.stdout)["info"]["ledger"]["num"] == 447  # its own state says where it stopped
    core(tmp_path, "new-db")
    assert core(tmp_path, "catchup", "640/320", SIM_EXIT_EARLY="1280=447").returncode == 0
    assert lcl(tmp_path) == 640  # another target's knob: caught up


def test_trusted_checkpoint_hashes_as_stellar_core_checks_them(tmp_path: Path) -> None:
    """verify-checkpoints writes the file; catchup with it trusts the destination's hash, and one
    hash edited fails verification with the source's lines and exit 3 (core_verify.py)."""
    hashes = tmp_path / "trusted.json"
    wrote = core(tmp_path, "verify-checkpoints", "--output-file", str(hashes), "--history-ledger", "1279")
    assert wrote.returncode == 0, wrote.stderr
    text = hashes.read_text()
    assert text.startswith('[\n[1279, "') and text.endswith('"],\n[0, ""]\n]\n')
    pairs = json.loads(text)
    assert [p[0] for p in pairs] == [*range(1279, 62, -64), 0] and len(pairs[0][1]) == 64
    core(tmp_path, "new-db")
    ok = core(tmp_path, "catchup", "1279/320", "--trusted-checkpoint-hashes", str(hashes))
    assert ok.returncode == 0 and f"Found trusted hash {pairs[0][1][:6]} for ledger 1279" in ok.stderr
    # runCatchup (a9b8613) warns whenever --trusted-hash is empty: the file alone still draws it.
    assert "Unsafe command" in ok.stderr
    off = core(tmp_path, "catchup", "1280/320", "--trusted-checkpoint-hashes", str(hashes))
    assert off.returncode == 1 and "not a checkpoint boundary" in off.stderr
    pairs[1][1] = "0" * 63 + "1"
    hashes.write_text(json.dumps(pairs))
    core(tmp_path, "new-db")
    bad = core(tmp_path, "catchup", "1215/320", "--trusted-checkpoint-hashes", str(hashes))
    assert bad.returncode == 3 and "* Catchup failed." in bad.stderr
    assert "[History ERROR] Catchup material failed verification - hash mismatch, propagating failure" in bad.stderr
    assert "verified: [seq=1215, hash=000000]" in bad.stderr
    assert lcl(tmp_path) == 1  # nothing applied


def test_trusted_hash_as_runcatchup_parses_it(tmp_path: Path) -> None:
    """--trusted-hash HEX (parseCatchup): the destination's own hash, no warning; a wrong one
    fails verification as the file's would; bad hex or both options at once are refused."""
    hashes = tmp_path / "trusted.json"
    core(tmp_path, "verify-checkpoints", "--output-file", str(hashes), "--history-ledger", "1279")
    good = dict(json.loads(hashes.read_text()))[1279]
    core(tmp_path, "new-db")
    ok = core(tmp_path, "catchup", "1279/320", "--trusted-hash", good.upper())
    assert ok.returncode == 0 and "Unsafe command" not in ok.stderr and "Found trusted hash" not in ok.stderr
    core(tmp_path, "new-db")
    bad = core(tmp_path, "catchup", "1279/320", "--trusted-hash", "ab" * 32)
    assert bad.returncode == 3 and "Catchup material failed verification - hash mismatch" in bad.stderr
    not_hex = core(tmp_path, "catchup", "1279/320", "--trusted-hash", "xyz")
    assert not_hex.returncode == 1 and "catchup value should be passed as" in not_hex.stderr
    both = core(tmp_path, "catchup", "1279/320", "--trusted-hash", good, "--trusted-checkpoint-hashes", str(hashes))
    assert both.returncode == 1 and "Either --trusted-checkpoint-hashes or --trusted-hash" in both.stderr
    assert lcl(tmp_path) == 1


def max_rss_bytes(cwd: Path, *args: str, **extra: str) -> int:
    # Measured from a small intermediate process: a child forked straight from
    # pytest inherits pytest's own high-water RSS into its ru_maxrss.
    probe = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(CORE), *args],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip()) * 1024


def test_peak_override_touches_real_memory(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    small = max_rss_bytes(tmp_path, "catchup", "640/320")
    core(tmp_path, "new-db")
    big = max_rss_bytes(tmp_path, "catchup", "640/320", SIM_PEAK_BYTES=f"1=5,640={160 << 20}")
    assert small < 100 << 20 < 160 << 20 <= big


def test_sigterm_drains_saves_lcl_and_exits_3(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    proc = subprocess.Popen(
        [str(CORE), "catchup", "1280/1280", *METRIC],
        cwd=tmp_path,
        env=env(SIM_SPEED="20"),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "applying ledger" in line:
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=10) == 3
    assert "* Catchup failed." in rest
    saved = lcl(tmp_path)
    assert 63 <= saved < 1280 and (saved + 1) % 64 == 0
    assert parse_tx_apply(rest.splitlines())[0] is not None


@pytest.mark.parametrize(
    "var,value",
    [
        ("SIM_SPEED", "fast"),
        ("SIM_SPEED", "0"),
        ("SIM_SPEED", "inf"),
        ("SIM_SEED", "1.5"),
        ("SIM_MEMORY_SCALE", "-1"),
        ("SIM_FAIL_TARGETS", "640,x"),
        ("SIM_PEAK_BYTES", "640"),
        ("SIM_PEAK_BYTES", "640=big"),
        ("SIM_EXIT_EARLY", "640"),
        ("SIM_EXIT_EARLY", "640=x"),
    ],
)
def test_bad_env_exits_64_naming_the_variable(tmp_path: Path, var: str, value: str) -> None:
    result = core(tmp_path, "new-db", **{var: value})
    assert result.returncode == 64 and var in result.stderr
    assert not (tmp_path / "sim-core-state.json").exists()


def test_issue25_fresh_start_logs_its_setup_and_a_resumed_leg_skips_most_of_it(tmp_path: Path) -> None:
    """The simulated core prints stellar-core's phase lines; a resumed leg has no bucket apply."""
    from catchup_assets.core.measure.logparse import parse_worker_log

    core(tmp_path, "new-db")
    fresh = core(tmp_path, "catchup", "640/320").stderr
    assert "[History INFO] ApplyBuckets : done, assuming state" in fresh
    assert "[History INFO] Downloading, unzipping and applying transactions for checkpoint 383" in fresh
    (tmp_path / "sim-core-state.json").write_text(json.dumps({"lcl": 447}))
    resumed = core(tmp_path, "catchup", "640/320").stderr
    assert "Applying buckets" not in resumed and "Downloading history archive state: " in resumed
    fresh_setup = parse_worker_log(fresh.splitlines()).setup_seconds
    resumed_setup = parse_worker_log(resumed.splitlines()).setup_seconds
    assert fresh_setup is not None and fresh_setup >= 0.3  # MIN_PEAK_HOLD at least
    assert resumed_setup is not None and resumed_setup < fresh_setup

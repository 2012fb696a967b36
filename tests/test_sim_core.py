"""The simulated stellar-core and its cost model, driven as a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from catchup_assets.sim.model import GiB, range_cost
from catchup_assets.worker.logparse import iter_lines, parse_tx_apply

CORE = Path(sys.executable).parent / "catchup-sim-core"
FAST = {"SIM_SPEED": "20000", "SIM_MEMORY_SCALE": "0.005"}
RANGE = 16_000


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SIM_")}
    return {**base, **FAST, **extra}


def core(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CORE), *args], cwd=cwd, env=env(**extra),
                          capture_output=True, text=True, timeout=60)


def lcl(cwd: Path) -> int:
    return json.loads((cwd / "sim-core-state.json").read_text())["lcl"]


def test_model_is_deterministic_and_seeded() -> None:
    assert range_cost(1000, 2000, seed=7) == range_cost(1000, 2000, seed=7)
    assert range_cost(1000, 2000, seed=7) != range_cost(1000, 2000, seed=8)
    assert range_cost(1000, 2000) != range_cost(1001, 2000)


def test_model_does_not_depend_on_the_process_hash_seed() -> None:
    code = "from catchup_assets.sim.model import range_cost; print(range_cost(5, 9000, 3))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": s}, check=True).stdout
            for s in ("1", "2")}
    assert len(outs) == 1


def full(first: int, seed: int = 0):
    return range_cost(first, first + RANGE - 1, seed)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_model_tip_heavier_than_genesis_at_real_world_scale(seed: int) -> None:
    old, mid, bump, tip = full(1, seed), full(30_000_001, seed), full(43_000_001, seed), \
        full(59_984_001, seed)
    for field in ("seconds_per_ledger", "peak_anon_bytes", "replay_anon_bytes",
                  "disk_bytes", "tx_per_ledger"):
        assert getattr(old, field) < getattr(mid, field) < getattr(tip, field), field
        assert getattr(bump, field) > getattr(mid, field), field
    assert old.peak_anon_bytes < 1 * GiB and 11 * GiB < tip.peak_anon_bytes < 17 * GiB
    assert 7 * 60 < old.seconds_per_ledger * RANGE < 13 * 60
    assert 4.5 * 3600 < tip.seconds_per_ledger * RANGE < 7.5 * 3600
    for cost in (old, mid, bump, tip):
        assert cost.replay_anon_bytes < cost.peak_anon_bytes


def test_L16_offline_info_num_is_far_from_the_ledger_key(tmp_path: Path) -> None:
    missing = core(tmp_path, "offline-info")
    assert missing.returncode == 1 and "No database" in missing.stderr
    assert core(tmp_path, "new-db").returncode == 0
    out = core(tmp_path, "offline-info").stdout
    doc = out[out.index("{"):]
    assert json.loads(doc)["info"]["ledger"]["num"] == 1
    lines = doc.splitlines()
    at = {key: i for i, line in enumerate(lines) for key in ('"ledger"', '"num"') if key in line}
    assert at['"num"'] - at['"ledger"'] >= 40
    assert sum('"num"' in line for line in lines) == 1


def test_L16_catchup_exits_2_when_nothing_is_left_to_apply(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    assert core(tmp_path, "catchup", "640/320").returncode == 0
    again = core(tmp_path, "catchup", "640/320")
    assert again.returncode == 2 and "nothing to apply" in again.stderr
    assert parse_tx_apply(again.stdout.splitlines()) == (0, 0.0)
    assert lcl(tmp_path) == 640


def test_L24_catchup_prints_medida_block_for_this_process_only(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    first = core(tmp_path, "catchup", "1000/1000")
    assert first.returncode == 0 and lcl(tmp_path) == 1000
    assert "Closed ledger 1000" in first.stdout and "Bucket apply" not in first.stdout
    count, seconds = parse_tx_apply(iter_lines([first.stdout.encode()]))
    cost = range_cost(2, 1000)
    assert count and count == pytest.approx(cost.tx_per_ledger * 999, abs=20)
    assert seconds == pytest.approx(0.7 * cost.seconds_per_ledger * 999)
    # A heavy range: its sum only fits in scientific notation.
    core(tmp_path, "new-db")
    heavy = core(tmp_path, "catchup", "59999999/2000", SIM_SPEED="1e6")
    assert heavy.returncode == 0
    assert any("  sum = " in ln and "e+" in ln for ln in heavy.stdout.splitlines())
    assert parse_tx_apply(heavy.stdout.splitlines())[1] > 100


def test_L24_some_runs_interleave_foreign_lines_deterministically(tmp_path: Path) -> None:
    def block_shape(seed: int) -> list[str]:
        core(tmp_path, "new-db")
        out = core(tmp_path, "catchup", "200/200", SIM_SEED=str(seed)).stdout.splitlines()
        start = next(i for i, ln in enumerate(out) if ln.endswith("ledger.transaction.apply:"))
        return [ln.split(" ", 2)[2] for ln in out[start:start + 8]]

    shapes = {seed: block_shape(seed) for seed in range(6)}
    mixed = [s for s, shape in shapes.items() if any("[Overlay" in ln for ln in shape)]
    assert mixed and len(mixed) < len(shapes)
    assert block_shape(mixed[0]) == shapes[mixed[0]]


def test_resume_replays_from_lcl_and_fresh_start_applies_buckets(tmp_path: Path) -> None:
    assert core(tmp_path, "catchup", "640/320").returncode == 1  # no database yet
    core(tmp_path, "new-db")
    (tmp_path / "sim-core-state.json").write_text(json.dumps({"lcl": 447}))
    out = core(tmp_path, "catchup", "640/320").stdout
    assert "Replaying ledgers 448..640 from LCL 447" in out and "Applying buckets" not in out
    core(tmp_path, "new-db")
    out = core(tmp_path, "catchup", "640/320").stdout
    assert "Applying buckets for ledger 320" in out and "Replaying ledgers 321..640" in out
    assert (tmp_path / "sim-buckets.bin").stat().st_size > 0


def test_fail_targets_fail_for_real(tmp_path: Path) -> None:
    core(tmp_path, "new-db")
    bad = core(tmp_path, "catchup", "640/320", SIM_FAIL_TARGETS="5, 640")
    assert bad.returncode == 1 and "Corrupt history archive" in bad.stderr
    assert lcl(tmp_path) == 1


def max_rss_bytes(cwd: Path, *args: str, **extra: str) -> int:
    # Measured from a small intermediate process: a child forked straight from
    # pytest inherits pytest's own high-water RSS into its ru_maxrss.
    probe = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(CORE), *args], cwd=cwd, env=env(**extra),
                         capture_output=True, text=True, timeout=60)
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
    proc = subprocess.Popen([str(CORE), "catchup", "1280/1280"], cwd=tmp_path,
                            env=env(SIM_SPEED="20"), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "Closed ledger" in line:
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()
    assert proc.wait(timeout=10) == 3
    assert "shutting down at LCL" in rest
    saved = lcl(tmp_path)
    assert 63 <= saved < 1280 and (saved + 1) % 64 == 0
    assert parse_tx_apply(rest.splitlines())[0] is not None


@pytest.mark.parametrize("var,value", [
    ("SIM_SPEED", "fast"), ("SIM_SPEED", "0"), ("SIM_SPEED", "inf"), ("SIM_SEED", "1.5"),
    ("SIM_MEMORY_SCALE", "-1"), ("SIM_FAIL_TARGETS", "640,x"), ("SIM_PEAK_BYTES", "640"),
    ("SIM_PEAK_BYTES", "640=big"),
])
def test_bad_env_exits_64_naming_the_variable(tmp_path: Path, var: str, value: str) -> None:
    result = core(tmp_path, "new-db", **{var: value})
    assert result.returncode == 64 and var in result.stderr
    assert not (tmp_path / "sim-core-state.json").exists()

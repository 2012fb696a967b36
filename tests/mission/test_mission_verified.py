"""A verified mission on the local backend (issue 24 item 3): the real worker, the simulated
core, a trusted checkpoint-hashes file written by the simulator's verify-checkpoints."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import mission_doc, save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from scaled import scaled_placement

CORE = Path(sys.executable).parent / "catchup-sim-core"
MiB = 1024**2
SPAN = MissionSpan(59_840_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
A, B = "0059904001-0059968000", "0059840001-0059904000"
# The worker catches up to the first checkpoint end at or past each target (entrypoint.sh).
A_END, B_END = 59_968_063, 59_904_063


def verify_checkpoints(tmp_path: Path) -> Path:
    out = tmp_path / "trusted.json"
    args = ["verify-checkpoints", "--output-file", str(out), "--history-ledger", "59968063"]
    subprocess.run([str(CORE), *args, "--from-ledger", "59839000"], check=True, capture_output=True, timeout=60)
    return out


def mission(tmp_path: Path, hashes: Path | None, name: str = "verified") -> MissionConfig:
    return MissionConfig(
        mission=name,
        span=SPAN,
        storage_root=str(tmp_path / "storage"),
        parallelism=2,
        placement=scaled_placement(64 * MiB),
        poll_seconds=0.1,
        trusted_hashes=None if hashes is None else str(hashes),
        env={"SIM_SPEED": "40000", "SIM_MEMORY_SCALE": "0.001"},
    )


def run(tmp_path: Path, cfg: MissionConfig):
    prepared = prepare(cfg)
    save_mission(Store(cfg.storage_root), cfg, prepared.previous, trusted=prepared.trusted)
    result = run_mission(prepared, LocalBackend(tmp_path / "work", cfg.mission, sample_interval=0.05))
    return prepared, result, RecordStore(Store(cfg.storage_root), cfg.mission).load()[0]


def test_a_verified_mission_passes_the_trusted_hashes_to_every_range_and_completes(tmp_path):
    hashes = verify_checkpoints(tmp_path)
    cfg = mission(tmp_path, hashes)
    prepared, result, records = run(tmp_path, cfg)
    assert sorted(result.done) == sorted([A, B]) and result.condemned == {}
    store = Store(cfg.storage_root)
    copy = store.path("verified/trusted_hashes.json")
    file_says = dict(json.loads(hashes.read_text()))
    for key, end in ((A, A_END), (B, B_END)):
        [rec] = [r for (k, _), r in records.items() if k == key]
        with gzip.open(rec.log_path, "rt") as f:  # the attempt's archived log
            log = f.read()
        # Each attempt was handed its checkpoint's one hash from the file, and stellar-core took it.
        assert f"TRUSTED: catchup to {end}, hash {file_says[end]}" in log
        assert f"Found trusted hash {file_says[end][:6]} for ledger {end}" in log
    doc = mission_doc(store, "verified")
    assert doc["catchup_trust"] == f"verified against {hashes}, sha256 {prepared.trusted.sha256}"
    assert doc["trusted_hashes"] == copy and Path(copy).read_bytes() == hashes.read_bytes()


def test_a_corrupted_hash_condemns_its_range_naming_verification_and_the_other_completes(tmp_path):
    hashes = verify_checkpoints(tmp_path)
    pairs = json.loads(hashes.read_text())
    hashes.write_text(json.dumps([[n, "ab" * 32 if n == A_END else h] for n, h in pairs]))
    _, result, records = run(tmp_path, mission(tmp_path, hashes))
    assert result.done == [B] and result.condemned.keys() == {A}
    [rec] = [r for (k, _), r in records.items() if k == A]
    assert rec.outcome == "failed" and rec.exit_code == 3  # stellar-core's exit 3, yet not retried
    assert "Catchup material failed verification - hash mismatch" in rec.reason
    assert "failed budget spent" in result.condemned[A] and "failed verification" in result.condemned[A]


def test_an_untrusted_mission_says_so(tmp_path):
    cfg = mission(tmp_path, None, "plain")
    prepared = prepare(cfg)
    save_mission(Store(cfg.storage_root), cfg, prepared.previous, trusted=prepared.trusted)
    assert mission_doc(Store(cfg.storage_root), "plain")["catchup_trust"] == "untrusted"


@pytest.mark.parametrize(
    "text, says",
    [
        ("{}", "top-level array"),
        ("[[1, 2]]", "entry 0"),
        ('[[63, "zz"]]', "entry 0"),
        ('[[0, ""]]', "names no checkpoint"),
        ("not json", "not JSON"),
    ],
)
def test_a_bad_trusted_hashes_file_is_refused_naming_it(tmp_path, text, says):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=says) as exc:
        prepare(mission(tmp_path, bad))
    assert str(bad) in str(exc.value) and "trusted_hashes" in str(exc.value)


def test_a_missing_trusted_hashes_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="trusted_hashes .*none.json cannot be read"):
        prepare(mission(tmp_path, tmp_path / "none.json"))


def test_a_trusted_hashes_file_short_of_a_range_is_refused_naming_the_range(tmp_path):
    """Each range needs the hash of the checkpoint it catches up to: a file that stops short
    is refused before anything is dispatched, naming the range and the checkpoint."""
    short = tmp_path / "short.json"
    args = ["verify-checkpoints", "--output-file", str(short), "--history-ledger", str(B_END)]
    subprocess.run([str(CORE), *args, "--from-ledger", "59839000"], check=True, capture_output=True, timeout=60)
    with pytest.raises(ConfigError, match=f"has no hash for 1 range.*{A} \\(checkpoint {A_END}\\)"):
        prepare(mission(tmp_path, short))


def test_a_verified_mission_on_a_remote_storage_root_is_planned_with_one_hash_per_range(tmp_path):
    """Nothing reads the file from the worker's disk any more: a memory:// root (as s3:// would)
    plans, keeps the file's copy beside mission.json, and hands each range its hash."""
    hashes = verify_checkpoints(tmp_path)
    cfg = dataclasses.replace(mission(tmp_path, hashes, "remote"), storage_root="memory://verified-remote")
    prepared = prepare(cfg)
    file_says = dict(json.loads(hashes.read_text()))
    assert prepared.trusted_by_key == {A: (A_END, file_says[A_END]), B: (B_END, file_says[B_END])}
    store = Store(cfg.storage_root)
    save_mission(store, cfg, prepared.previous, trusted=prepared.trusted)
    assert store.read_bytes("remote/trusted_hashes.json") == hashes.read_bytes()


def test_the_trusted_env_cannot_be_set_by_hand(tmp_path):
    with pytest.raises(ConfigError, match="env CATCHUP_TRUSTED_HASH is set by the dispatcher"):
        dataclasses.replace(mission(tmp_path, None), env={"CATCHUP_TRUSTED_HASH": "ab" * 32})

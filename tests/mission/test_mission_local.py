"""A small mission end to end on the local backend: real subprocesses, the real
worker script, the simulated stellar-core; profile and tier map checked row by row."""

import gzip

import fsspec
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.size.sizing import MemoryLadder
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile, build_tier_map
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table
from scaled import scaled_placement

MiB = 1024**2
SPAN = MissionSpan(59_712_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
A, B, C, D = "0059904001-0059968000", "0059840001-0059904000", "0059776001-0059840000", "0059712001-0059776000"
BASE = 64 * MiB


@pytest.fixture(scope="module")
def mission(tmp_path_factory):
    root = tmp_path_factory.mktemp("mission")
    cfg = MissionConfig(
        mission="e2e",
        span=SPAN,
        storage_root=str(root / "storage"),
        parallelism=4,
        placement=scaled_placement(BASE, 4 * MiB),
        poll_seconds=0.1,
        env={
            "SIM_SPEED": "40000",
            "SIM_MEMORY_SCALE": "0.001",
            # A allocates past its first limit; C's archive is corrupt.
            "SIM_PEAK_BYTES": f"59968000={72 * MiB}",
            "SIM_FAIL_TARGETS": "59840000",
        },
    )
    # B's first attempt is reclaimed once its core has applied a checkpoint past bucket
    # apply (an event, not a timer: a loaded machine cannot move it before new-db).
    backend = LocalBackend(
        root / "work", "e2e", sample_interval=0.05, disruption_triggers={f"{B}-a001": "applying ledger"}
    )
    prepared = prepare(cfg)
    result = run_mission(prepared, backend)
    out = build_profile(cfg.storage_root, "e2e")
    out.tier_map = build_tier_map(cfg.storage_root, "e2e", cfg.placement)[0]
    records = RecordStore(Store(cfg.storage_root), "e2e").load()[0]
    return cfg, backend, result, out, records


def chain(records, key):
    return [records[(key, a)] for a in sorted(a for k, a in records if k == key)]


def test_L9_failing_range_is_condemned_while_the_rest_finish(mission):
    _, _, result, _, _ = mission
    assert result.condemned.keys() == {C}
    assert "failed budget spent" in result.condemned[C] and "exit 1" in result.condemned[C]
    assert sorted(result.done) == sorted([A, B, D])


def test_L6_oom_then_success_at_the_next_rung(mission):
    _, _, _, out, records = mission
    a = chain(records, A)
    assert [r.outcome for r in a] == ["oom", "ok"]
    assert [r.memory_limit_bytes for r in a] == [BASE, int(BASE * 1.5)]
    assert a[0].reason.startswith("exit 137; termination OOMKilled")
    row = {r["range_key"]: r for r in out.profile.to_pylist()}[A]
    # L21: the OOM's limit stays a lower bound on demand
    assert row["oom_floor_bytes"] == BASE and row["peak_anon_bytes"] >= BASE and row["oom_count"] == 1


def test_L16_L21_L22_disrupted_attempt_resumes_and_the_chain_is_summed(mission):
    _, _, _, out, records = mission
    b = chain(records, B)
    assert [r.outcome for r in b] == ["disrupted", "ok"]
    assert b[0].fresh_start is True and b[1].fresh_start is False
    first, last = 59_840_001, 59_904_000
    # The worker resumes from any LCL in [TARGET - COUNT, TARGET): COUNT covers the overlap.
    assert last - (last - first + 1 + 320) <= b[1].resumed_from_ledger < last
    assert "imminent node shutdown" in b[0].reason and "TerminationByKubelet" in b[0].reason
    row = {r["range_key"]: r for r in out.profile.to_pylist()}[B]
    assert row["chain_attempts"] == 2 and row["outcomes"] == "disrupted ok"
    assert row["seconds"] == pytest.approx(b[0].seconds + b[1].seconds)
    assert row["tx_apply_count"] == b[0].tx_apply_count + b[1].tx_apply_count
    assert row["peak_anon_bytes"] == max(b[0].peak_anon_bytes, b[1].peak_anon_bytes)
    assert row["wall_seconds"] >= row["seconds"]


def test_profile_and_tier_map_row_by_row(mission):
    cfg, _, _, out, records = mission
    profile = {r["range_key"]: r for r in out.profile.to_pylist()}
    # C failed for real and never OOMed: what its attempt measured before the corrupt archive
    # stopped it sizes nothing, so it has no row (issue 14: only completed chains size).
    assert sorted(profile) == sorted([A, B, D]) and out.unmeasured == [C]
    assert [profile[k]["completed"] for k in (A, B, D)] == [True, True, True]
    assert profile[D]["outcomes"] == "ok"
    for k, r in profile.items():
        assert (
            r["peak_anon_bytes"] > 5 * MiB
            and r["peak_working_set_bytes"] >= r["peak_anon_bytes"] - r["oom_floor_bytes"]
        )
        assert r["seconds"] > 0 and r["last_ledger"] == int(k[-10:])
    assert profile[D]["tx_apply_count"] > 0 and profile[D]["peak_ephemeral_bytes"] > 0
    tiers = {r["range_key"]: r for r in out.tier_map.to_pylist()}
    assert sorted(tiers) == sorted([A, B, C, D])  # every planned range is placed
    # Unmeasured, C is sized as the measured range above it (B), not from its own failed attempt.
    assert tiers[C]["peak_anon_bytes"] == profile[B]["peak_anon_bytes"]
    sizing = cfg.placement.sizing
    for k, t in tiers.items():
        if k == C:
            continue
        want = int(profile[k]["peak_anon_bytes"] * sizing.margin + sizing.cache_headroom_bytes)
        assert t["memory_request_bytes"] == want  # L27
        cut = cfg.placement.tiers.by_name(t["tier"]).memory_cut_bytes
        assert want <= cut or t["tier"] == cfg.placement.tiers.ladder[-1].name
    # the OOMed range needs more than any range that never OOMed
    assert tiers[A]["memory_request_bytes"] > max(tiers[k]["memory_request_bytes"] for k in (B, D))
    on_disk = read_table(Store(cfg.storage_root), "e2e/range_profile.parquet")
    assert on_disk.num_rows == 3


def test_L3_data_kept_only_for_the_condemned_range(mission):
    _, backend, _, _, _ = mission
    kept = sorted(p.name for p in backend.data_root.iterdir() if not p.name.startswith("."))
    assert kept == [C]


def test_L31_logs_archived_compressed_per_attempt_each_with_its_own_lines_only(mission):
    """A retry's worker ships the earlier attempt's file from the data dir into its own log;
    collect takes it out again, so every archive holds its own attempt's run and nothing else."""
    _, backend, _, _, records = mission
    for rec in records.values():
        with fsspec.open(rec.log_path, "rb") as f:
            text = gzip.decompress(f.read()).decode()
        assert text.count(f"WORKER: range {rec.range_key}") == 1 and "==> shipped log" not in text
    # The retries shipped their first attempts' files; the condemned range's own is still there.
    assert sorted(p.name for p in (backend.data_root / C / "logs").iterdir()) == ["a001.log"]
    assert "Got an exception: Invariant" in gzip.decompress(open(chain(records, C)[0].log_path, "rb").read()).decode()


def test_L24_tx_apply_comes_from_stellar_core_s_exit_report_end_to_end(mission):
    """The real worker asks the simulated core for the metric (--metric); the core prints
    it in stellar-core's format; the real log reader finds it; the profile carries it."""
    _, _, _, out, records = mission
    row = {r["range_key"]: r for r in out.profile.to_pylist()}[D]
    assert row["tx_apply_count"] > 0 and row["tx_apply_seconds"] > 0
    (rec,) = chain(records, D)
    with fsspec.open(rec.log_path, "rb") as f:
        text = gzip.decompress(f.read()).decode()
    assert "[default INFO] metric 'ledger.transaction.apply':" in text
    assert (row["tx_apply_count"], row["tx_apply_seconds"]) == (rec.tx_apply_count, rec.tx_apply_seconds)


@pytest.mark.parametrize(
    "disk, message, disruption",
    [
        (
            {"ephemeral_limit_bytes": 4 * MiB},
            "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi.",
            False,
        ),
        # Crossed (90% used) well before the catchup ends: a loaded machine's slower sampling still sees it.
        ({"node_disk_bytes": 5 * MiB}, "The node was low on resource: ephemeral-storage.", True),
    ],
)
def test_L4_an_attempt_that_outgrows_its_disk_is_evicted_not_disrupted(tmp_path, disk, message, disruption):
    """The local kubelet evicts as the real one does: over the pod's own limit without a
    DisruptionTarget, as the disk hog of its own node with one; both are the range's disk."""
    cfg = MissionConfig(
        mission="disk",
        span=MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320),
        storage_root=str(tmp_path / "storage"),
        parallelism=1,
        poll_seconds=0.1,
        placement=scaled_placement(BASE),
        retry=RetryPolicy(environmental=0),
        env={"SIM_SPEED": "10000", "SIM_MEMORY_SCALE": "0.001"},
    )
    backend = LocalBackend(tmp_path / "work", "disk", sample_interval=0.05, **disk)
    result = run_mission(prepare(cfg), backend)
    (rec,) = RecordStore(Store(cfg.storage_root), "disk").load()[0].values()
    assert rec.outcome == "evicted" and message in rec.reason
    assert ("DisruptionTarget" in rec.reason) is disruption
    assert rec.peak_ephemeral_bytes > 4 * MiB
    assert A in result.condemned and "environmental budget spent" in result.condemned[A]


def test_a_mission_whose_every_range_fails_the_same_way_stops_with_one_cause(tmp_path):
    """A corrupt archive under every range: after breaker_attempts identical failures the mission
    stops with stellar-core's own error as the cause, and no range's budget is spent."""
    cfg = MissionConfig(
        mission="broken",
        span=SPAN,
        storage_root=str(tmp_path / "storage"),
        parallelism=1,
        breaker_attempts=3,
        placement=scaled_placement(BASE, ladder=MemoryLadder()),
        poll_seconds=0.1,
        env={
            "SIM_SPEED": "40000",
            "SIM_MEMORY_SCALE": "0.001",
            "SIM_FAIL_TARGETS": ",".join(k[-8:] for k in (A, B, C, D)),
        },
    )
    result = run_mission(prepare(cfg), LocalBackend(tmp_path / "work", "broken", sample_interval=0.05))
    assert result.condemned == {} and result.done == []
    cause = next(iter(result.results.values())).reason
    assert "circuit breaker: 3 attempts in a row failed the same way" in cause
    assert '[default FATAL] Got an exception: Invariant "ConservationOfLumens" does not hold' in cause
    records = RecordStore(Store(cfg.storage_root), "broken")
    ran = {k for k, _ in records.load()[0]}
    assert len(ran) == 3 and set(records.load_resets()) == ran  # the fourth never ran; none was charged


def test_L4_a_core_that_exits_0_short_of_its_target_leaves_its_range_failed(tmp_path):
    """Exit 0 is not done (issue 24 item 6): the worker reads offline-info after catchup, and a
    range its core left short is failed, condemned at once (L5), naming the ledger reached."""
    cfg = MissionConfig(
        mission="short",
        span=MissionSpan(59_840_001, 59_968_000, ledgers_per_range=64_000, overlap=320),
        storage_root=str(tmp_path / "storage"),
        parallelism=2,
        placement=scaled_placement(BASE),
        poll_seconds=0.1,
        env={"SIM_SPEED": "40000", "SIM_MEMORY_SCALE": "0.001", "SIM_EXIT_EARLY": "59968000=59930000"},
    )
    result = run_mission(prepare(cfg), LocalBackend(tmp_path / "work", "short", sample_interval=0.05))
    assert result.done == [B] and result.condemned.keys() == {A}
    (rec,) = chain(RecordStore(Store(cfg.storage_root), "short").load()[0], A)
    assert rec.outcome == "failed" and rec.exit_code == 65
    assert "WORKER FAILED: catchup exited 0 at LCL 59930000, short of target 59968000" in rec.reason
    assert "failed budget spent" in result.condemned[A] and "LCL 59930000" in result.condemned[A]


def test_issue25_setup_and_replay_read_from_the_real_worker_log_s_phase_lines(mission):
    """The real worker runs the simulated core, which logs stellar-core's catchup phase lines;
    the log reader times the setup, the record keeps it, the profile splits setup from replay."""
    _, _, _, out, records = mission
    rows = {r["range_key"]: r for r in out.profile.to_pylist()}
    (d,) = chain(records, D)
    with fsspec.open(d.log_path, "rb") as f:
        text = gzip.decompress(f.read()).decode()
    assert "[History INFO] ApplyBuckets : done, assuming state" in text
    assert d.setup_seconds is not None and 0.3 <= d.setup_seconds < d.seconds  # MIN_PEAK_HOLD at least
    assert rows[D]["setup_seconds"] == d.setup_seconds
    assert rows[D]["replay_seconds"] == pytest.approx(d.seconds - d.setup_seconds)
    # B was reclaimed mid-replay and resumed: the chain's setup is its fresh leg's; the resumed
    # leg applied no buckets, and its own short setup counts in the replay.
    b = chain(records, B)
    with fsspec.open(b[1].log_path, "rb") as f:
        assert "Applying buckets" not in gzip.decompress(f.read()).decode()
    assert None not in (b[0].setup_seconds, b[1].setup_seconds)
    assert rows[B]["setup_seconds"] == b[0].setup_seconds
    assert rows[B]["replay_seconds"] == pytest.approx(sum(r.seconds - r.setup_seconds for r in b))

"""The cleanup probe (issue 36 item 9): the dispatcher dies with attempts in flight, they finish on their own,
`cleanup` runs, then the step is retried (the same holder, so the same attempt ids); the profile is the clean run's.

On the simulated cluster (kubesim) with its virtual clock, so a range takes the same seconds in both
runs. Each range's first Job catches up (900 s, its transactions in the log); a later Job of the same
range finds its volume already at the range's end, as the real worker does (`RESUME: range ... already
complete`), and ends in a second with no transactions: what the retry recorded before, for ranges
that had taken minutes.
"""

from __future__ import annotations

from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.ports import Leftover
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.mission.cleanup import cleanup
from catchup_assets.mission.cleanup_settle import settled_plan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import NS, SPAN, A, B, C, D, SimClock, backend, flat, medida, mission, sim_cluster
from kubesim.kube_script import Script

GiB = 1024**3
HOLDER = "run-1"  # the Dagster run's: its step retry takes its own claims back (claims.py)
TX = {A: 1100, B: 1200, C: 1300, D: 1400}


def volumes_remember():
    """Scripts whose volumes remember: a range's second Job finds the first one's catchup complete."""
    jobs: dict[str, int] = {}

    def script(job: dict) -> Script:
        key = job["metadata"]["labels"]["catchup.stellar.org/range-key"]
        jobs[key] = jobs.get(key, 0) + 1
        if jobs[key] > 1:
            last = key.split("-")[1].lstrip("0")
            return Script(
                duration=1,
                memory=flat(GiB // 4, GiB // 2),
                lines=[f"RESUME: range {key} already complete: LCL {last} >= target {last}"],
            )
        fresh = ["RESUME DECLINED: no range marker in the data dir (never started here)", *medida(TX[key])]
        return Script(duration=60 if key == D else 900, memory=flat(3 * GiB, 4 * GiB), lines=fresh)

    return script


def profile(root: str) -> list[dict]:
    """The profile's rows; `wall_seconds` (first start to last end) and nothing else left out: a dead
    dispatcher's wait for its retry is wall time the clean run did not have."""
    return [
        {k: v for k, v in row.items() if k != "wall_seconds"} for row in build_profile(root, "m1").profile.to_pylist()
    ]


def clean_run(tmp_path) -> list[dict]:
    with sim_cluster(scripts=volumes_remember()) as (api, kubelet):
        cfg = mission(tmp_path / "clean")
        save_mission(Store(cfg.storage_root), cfg)
        result = run_mission(
            prepare(cfg), backend(api, kubelet, tmp_path / "clean"), clock=SimClock(kubelet), holder=HOLDER
        )
        assert sorted(result.done) == sorted([A, B, C, D])
        return profile(cfg.storage_root)


def killed_then(tmp_path, api, kubelet, after_the_kill) -> str:
    """A dispatcher SIGKILLed at pass 10 (D done; A, B, C in flight), its attempts left to finish on
    their own, `after_the_kill(cfg, clock)`, then the step retried to the mission's end."""
    cfg = mission(tmp_path / "probe")
    save_mission(Store(cfg.storage_root), cfg)
    clock = SimClock(kubelet)
    records = RecordStore(Store(cfg.storage_root), "m1")
    dead = Dispatcher(
        DispatchConfig(cfg, prepare(cfg).ordered, holder=HOLDER),
        backend(api, kubelet, tmp_path / "a"),
        records,
        clock=clock,
    )
    for _ in range(10):
        dead.pass_once()
        clock.sleep(10)
    assert records.load()[1] == {(D, 1)}  # A, B and C in flight, unrecorded
    clock.sleep(1000)  # nobody watches: they finish on their own
    after_the_kill(cfg, clock)
    retry = run_mission(prepare(cfg), backend(api, kubelet, tmp_path / "retry"), clock=clock, holder=HOLDER)
    assert sorted(retry.done) == sorted([A, B, C, D]) and retry.condemned == {}
    return cfg.storage_root


def test_issue36_item9_the_cleanup_probe_leaves_the_profile_of_the_clean_run(tmp_path):
    clean = clean_run(tmp_path)
    assert [row["seconds"] for row in clean] == [60.0, 900.0, 900.0, 900.0]  # D first, by ledger
    with sim_cluster(scripts=volumes_remember()) as (api, kubelet):

        def cleanup_run(cfg, clock):
            b = backend(api, kubelet, tmp_path / "cleanup")
            plan, settled = settled_plan(cfg.storage_root, "m1", b, now=clock.time())
            assert sorted(settled.recorded) == sorted(f"{k} a001 ok" for k in (A, B, C))  # read first
            assert plan.live == () and plan.unrecorded == ()
            result = cleanup(plan, b)
            assert [o.kind for o in result.deleted] == [Leftover.VOLUME] * 3  # the completed ranges' PVCs

        root = killed_then(tmp_path, api, kubelet, cleanup_run)
        assert api.store.count("jobs", NS) == 0  # the retry found every range done: nothing started again
    assert profile(root) == clean


def test_issue36_item9_attempts_deleted_unrecorded_are_never_0_2_s_ranges(tmp_path):
    """Jobs deleted unrecorded (the old cleanup, or `kubectl delete`): the retry resubmits the same ids,
    which find their ranges complete on the kept volumes. Those ranges' work is lost with the Jobs, so
    the profile leaves them out (a warning names them); it never sizes from a one-second range."""
    with sim_cluster(scripts=volumes_remember()) as (api, kubelet):

        def deleted_unrecorded(cfg, clock):
            b = backend(api, kubelet, tmp_path / "kubectl")
            b.remove([o for o in b.leftovers() if o.kind == Leftover.ATTEMPT])

        root = killed_then(tmp_path, api, kubelet, deleted_unrecorded)
    records, _ = RecordStore(Store(root), "m1").load()
    assert {records[(k, 1)].seconds for k in (A, B, C)} == {1.0}  # what the retry measured: a second each
    rows = build_profile(root, "m1").profile.to_pylist()
    assert [row["range_key"] for row in rows] == [D]
    assert (SPAN.first_ledger, rows[0]["seconds"]) == (59_712_001, 60.0)

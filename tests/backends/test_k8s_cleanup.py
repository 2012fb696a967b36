"""Cleanup after an abandoned mission on the simulated cluster (issue 21 item 3).

A dispatcher is stopped mid-mission, its Jobs and PVCs left behind; assertions are
on what the API server holds afterwards, by the mission's label, and on what the
cleanup reported before it deleted anything.
"""

from __future__ import annotations

import pytest
from kubernetes.client import V1PersistentVolumeClaim

from catchup_assets.backends.kubernetes.json_views import ModelView
from catchup_assets.backends.kubernetes.leftovers import _size
from catchup_assets.backends.kubernetes.names import mission_selector
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.mission.cleanup import MissionLive, cleanup, plan_cleanup
from catchup_assets.mission.cleanup_settle import settled_plan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import NS, A, B, C, D, SimClock, backend, flat, mission, sim_cluster
from kubesim.kube_script import Script

GiB = 1024**3
SELECTOR = mission_selector("m1")


def held(api) -> tuple[int, int]:
    """(Jobs, PVCs) the API server holds with the mission's label."""
    return api.store.count("jobs", NS, SELECTOR), api.store.count("persistentvolumeclaims", NS, SELECTOR)


def script(job: dict):
    key = job["metadata"]["labels"]["catchup.stellar.org/range-key"]
    return Script(duration={D: 60, C: 2000}.get(key, 900), memory=flat(1 * GiB, 2 * GiB))


def stopped_mid_mission(api, kubelet, tmp_path, passes: int = 10):
    """A dispatcher that ran `passes` passes and then died: D completed (its PVC freed, L3),
    A, B and C in flight, their Jobs and PVCs left."""
    kubelet.script = script
    cfg = mission(tmp_path)
    save_mission(Store(cfg.storage_root), cfg)
    clock = SimClock(kubelet)
    d = Dispatcher(
        DispatchConfig(cfg, prepare(cfg).ordered),
        backend(api, kubelet, tmp_path),
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=clock,
    )
    for _ in range(passes):
        d.pass_once()
        clock.sleep(10)
    assert held(api) == (3, 3)
    return cfg, clock


def test_cleanup_refuses_while_the_run_is_live_and_force_stops_records_then_deletes_every_job_and_pvc(tmp_path):
    with sim_cluster() as (api, kubelet):
        cfg, clock = stopped_mid_mission(api, kubelet, tmp_path)
        b = backend(api, kubelet, tmp_path / "cleanup")
        plan = plan_cleanup(cfg.storage_root, "m1", b, now=clock.time())
        assert any("3 live attempts" in why for why in plan.live)
        with pytest.raises(MissionLive, match="^force: a run of mission m1 is live"):
            cleanup(plan, b)
        assert held(api) == (3, 3)  # refused: nothing deleted
        plan, settled = settled_plan(cfg.storage_root, "m1", b, everything=True, force=True, now=clock.time())
        assert settled.stopped == 3 and held(api) == (0, 3)  # stopped as a stopping run stops them (L37)
        records, done = RecordStore(Store(cfg.storage_root), "m1").load()
        assert {k for k, a in done} == {A, B, C, D} and {records[(k, 1)].outcome for k in (A, B, C)} == {"stopped"}
        assert plan.freed_bytes == 3 * 100 * GiB and plan.keep == ()
        result = cleanup(plan, b, force=True)
        assert result.forced and held(api) == (0, 0)
        assert api.store.count("pods", NS, SELECTOR) == 0  # Background propagation took the pods
        assert "deleted 0 attempts and 3 volumes, freeing 300.0 GiB (forced past a live run)" in result.lines()


def test_cleanup_after_a_terminated_run_records_what_finished_keeps_resumable_pvcs_then_all_leaves_nothing(tmp_path):
    with sim_cluster() as (api, kubelet):
        cfg, clock = stopped_mid_mission(api, kubelet, tmp_path)
        clock.sleep(1000)  # nobody dispatches: A and B finish unrecorded, C still runs
        b = backend(api, kubelet, tmp_path / "cleanup")
        b.shutdown(15)  # the terminated run's grace, as a Dagster termination does (L37): C's Job goes
        assert held(api) == (2, 3)
        clock.sleep(200)  # past the claims' grace
        plan = plan_cleanup(cfg.storage_root, "m1", b, now=clock.time())
        assert plan.live == ()
        lines = plan.lines()
        assert lines[0] == "mission m1: 2 attempts (0 live) and 3 volumes holding 300.0 GiB left"
        assert lines[1] == "  delete: 0 attempts, 0 volumes: frees 0.0 GiB"  # no record, nothing goes (issue 36)
        assert f"  kept:   2 attempts without a durable record ({B} a001, {A} a001)" in lines[3]
        assert cleanup(plan, b, dry_run=True).lines() == ["dry run: nothing deleted"] and held(api) == (2, 3)
        plan, settled = settled_plan(cfg.storage_root, "m1", b, now=clock.time())
        assert settled.recorded == (f"{B} a001 ok", f"{A} a001 ok")  # read and recorded as a dispatcher would
        records, done = RecordStore(Store(cfg.storage_root), "m1").load()
        assert {(A, 1), (B, 1)} <= done and (records[(A, 1)].seconds, records[(A, 1)].peak_anon_bytes) == (900, GiB)
        assert held(api) == (0, 3)  # released once recorded, as the dispatcher releases them
        assert [o.range_key for o in plan.keep] == [C]  # A and B completed: their PVCs go
        assert (plan.freed_bytes, plan.kept_bytes) == (200 * GiB, 100 * GiB)
        cleanup(plan, b)
        assert held(api) == (0, 1)  # C's PVC kept for a later run
        plan = plan_cleanup(cfg.storage_root, "m1", b, everything=True, now=clock.time())
        assert plan.freed_bytes == 100 * GiB
        cleanup(plan, b)
        assert held(api) == (0, 0)


def test_a_later_run_completes_the_ranges_whose_pvcs_cleanup_kept_charging_no_budget(tmp_path):
    """The Jobs a cleanup deleted unrecorded spend their attempt numbers, nothing more: the next run
    starts the next attempt of each range on its kept PVC, and every range completes."""
    with sim_cluster() as (api, kubelet):
        cfg, clock = stopped_mid_mission(api, kubelet, tmp_path)
        b = backend(api, kubelet, tmp_path / "cleanup")
        b.shutdown(15)
        clock.sleep(200)
        cleanup(plan_cleanup(cfg.storage_root, "m1", b, now=clock.time()), b)
        assert held(api) == (0, 3)
        result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path / "again"), clock=clock)
        assert result.condemned == {} and sorted(result.done) == sorted([A, B, C, D])
        records, done = RecordStore(Store(cfg.storage_root), "m1").load()
        assert {r.outcome for k, r in records.items() if k in done} == {"ok"}  # no failure charged
        assert held(api) == (0, 0)  # each completed range freed its kept PVC (L3)


@pytest.mark.parametrize(
    "requested, capacity, size",
    [
        ("100Gi", None, 100 * GiB),
        ("100Gi", "107374182400", 100 * GiB),
        ("100Gi", "128Gi", 128 * GiB),  # a class that rounds up: the capacity is what it holds
        ("100G", None, 100 * 10**9),
        ("1Ti", "0.5Ti", 1024 * GiB),
        ("lots", "2Gi", 2 * GiB),  # a request that is not a quantity counts 0
        (None, None, 0),
    ],
)
def test_a_pvc_counts_the_larger_of_its_request_and_its_capacity(requested, capacity, size):
    claim = {"metadata": {"name": "p"}, "spec": {"resources": {"requests": {}}}, "status": {}}
    if requested is not None:
        claim["spec"]["resources"]["requests"]["storage"] = requested
    if capacity is not None:
        claim["status"]["capacity"] = {"storage": capacity}
    assert _size(ModelView(claim, V1PersistentVolumeClaim)) == size

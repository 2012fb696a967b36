"""The live state of an attempt on the simulated cluster (issue 23 item 3): pending told apart
from running in the status line and in each attempt's start, through real reconcile passes (T1)."""

from __future__ import annotations

import pytest

from catchup_assets.core.dispatch.ports import Phase
from catchup_assets.core.dispatch.reconciler import DispatchConfig, Dispatcher
from catchup_assets.core.plan.ranges import dispatch_order, plan_ranges
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from test_k8s_backend import NS, SETTINGS, SimClock, backend, mission, sim_cluster


@pytest.fixture
def cluster():
    with sim_cluster() as c:
        yield c


def test_Z1_pods_that_cannot_schedule_are_pending_not_running_until_a_node_takes_them(cluster, tmp_path):
    api, kubelet = cluster
    nebula = Tiers().by_name("nebula")
    for n in range(3):  # the unprofiled ranges' tier has no node: their pods cannot schedule
        kubelet.remove_node(f"nebula-{n}")
    cfg = mission(tmp_path, parallelism=4)
    events = []
    clock = SimClock(kubelet)
    d = Dispatcher(
        DispatchConfig(cfg, dispatch_order(plan_ranges(cfg.span), cfg.order)),
        backend(api, kubelet, tmp_path, unschedulable_seconds=3600),
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=clock,
        on_attempt=events.append,
    )
    for _ in range(5):
        status = d.pass_once()
        clock.sleep(10)
    pods = api.store.list("pods", NS)
    assert len(pods) == 4 and {p["status"]["phase"] for p in pods} == {"Pending"}
    assert {c["reason"] for p in pods for c in p["status"]["conditions"] if c["type"] == "PodScheduled"} == {
        "Unschedulable"
    }
    assert (status.in_flight, status.pending, status.running) == (4, 4, 0)
    assert "in flight 4 (pending 4, running 0)" in status.line()
    # Each attempt's start told once, at submit, pending with no node; none is told running.
    assert sorted((e.range_key, e.attempt, e.phase) for e in events) == sorted(
        (r.key, 1, Phase.PENDING) for r in plan_ranges(cfg.span)
    )
    assert {(e.tier, e.node) for e in events} == {("nebula", None)}

    # Nodes arrive: the pods bind and start, and each attempt is told running once, on its node.
    for n in range(3):
        kubelet.add_node(
            f"nebula-late-{n}",
            labels={SETTINGS.tier_node_label: "nebula"},
            taints=[{"key": SETTINGS.tier_taint_key, "value": "nebula", "effect": "NoSchedule"}],
            allocatable={"memory": str(nebula.node_memory_bytes), "cpu": "64"},
        )
    kubelet.advance(5, tick=5)
    status = d.pass_once()
    running = {p["metadata"]["labels"]["catchup.stellar.org/range-key"]: p for p in api.store.list("pods", NS)}
    running = {k: p for k, p in running.items() if p["status"]["phase"] == "Running"}
    assert running and status.running == len(running) and status.pending == 4 - len(running)
    assert f"(pending {4 - len(running)}, running {len(running)})" in status.line()
    told = {e.range_key: e for e in events if e.phase is Phase.RUNNING}
    assert told.keys() == running.keys()
    assert all(told[k].node == p["spec"]["nodeName"] for k, p in running.items())
    assert all(e.node.startswith("nebula-late-") for e in told.values())
    d.pass_once()
    assert len([e for e in events if e.phase is Phase.RUNNING]) == len(told)  # not once a pass

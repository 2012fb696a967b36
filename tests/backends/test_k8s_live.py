"""The live state of an attempt on the simulated cluster (issue 23 item 3): pending told apart
from running in the status line and in each attempt's start, through real reconcile passes (T1);
a running pod's log read bounded by tailLines and limitBytes, and followed as the kubelet writes it."""

from __future__ import annotations

import threading
import time

import pytest

from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.ports import Phase
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.ranges import plan_ranges
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import NS, SETTINGS, A, SimClock, backend, flat, mission, sim_cluster
from kubesim.kube_script import Script


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


LINES = [f"line {i:02d} of the catchup" for i in range(20)]  # one each 5 s of a 100 s run


def test_a_running_pod_s_log_is_read_bounded_and_followed_until_its_container_ends(cluster, tmp_path):
    api, kubelet = cluster
    kubelet.script = lambda pod: Script(duration=100, memory=flat(2 * GiB, 3 * GiB), lines=LINES)
    cfg = mission(tmp_path, parallelism=1)
    k8s = backend(api, kubelet, tmp_path)
    d = Dispatcher(
        DispatchConfig(cfg, dispatch_order(plan_ranges(cfg.span), cfg.order)),
        k8s,
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=SimClock(kubelet),
    )
    d.pass_once()
    kubelet.advance(31, tick=1)  # running, 30 s in: lines 00-06 written
    (pod,) = api.store.list("pods", NS)
    assert pod["status"]["phase"] == "Running"
    assert list(k8s.read_log(A, 1)) == LINES[:7]
    assert list(k8s.read_log(A, 1, tail_lines=2)) == LINES[5:7]  # tailLines: the last entries
    cut = list(k8s.read_log(A, 1, limit_bytes=30))  # limitBytes cuts mid-line: what came whole, then the cut
    assert cut[0] == LINES[0] and LINES[1].startswith(cut[1]) and len(cut) == 2

    got: list[tuple[float, str]] = []

    def follow() -> None:
        for line in k8s.read_log(A, 1, follow=True, tail_lines=3):
            got.append((kubelet.clock(), line))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    seen_at = {}
    for _ in range(14):  # the cluster moves on, 5 s a step; the reader gets each line as it comes
        deadline = time.monotonic() + 10
        while len(got) < min(3 + len(seen_at), 3 + 13) and time.monotonic() < deadline:
            time.sleep(0.01)
        seen_at[kubelet.clock()] = len(got)
        kubelet.advance(5, tick=5)
    reader.join(timeout=10)
    assert not reader.is_alive(), "the follow did not end with its container"
    assert [text for _, text in got] == LINES[4:]  # the last 3 first, then every new one
    # Each new line arrived while the container still ran, in the step that wrote it, not at the end.
    start = kubelet.clock() - 70  # when the follow began (30 s in)
    assert [round(t - start) for t, _ in got[3:]] == [5 * i for i in range(1, 14)]
    assert pod_phase(api) in ("Succeeded", None)


def test_a_followed_read_ends_at_limit_bytes_though_the_container_still_runs(cluster, tmp_path):
    api, kubelet = cluster
    kubelet.script = lambda pod: Script(duration=1000, memory=flat(2 * GiB, 3 * GiB), lines=LINES)
    cfg = mission(tmp_path, parallelism=1)
    k8s = backend(api, kubelet, tmp_path)
    d = Dispatcher(
        DispatchConfig(cfg, dispatch_order(plan_ranges(cfg.span), cfg.order)),
        k8s,
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=SimClock(kubelet),
    )
    d.pass_once()
    kubelet.advance(101, tick=1)  # lines 00-02 written (one each 50 s)
    lines = list(k8s.read_log(A, 1, follow=True, limit_bytes=2 * (len(LINES[0]) + 1)))
    assert lines == LINES[:2] and pod_phase(api) == "Running"


def pod_phase(api) -> str | None:
    pods = api.store.list("pods", NS)
    return pods[0]["status"]["phase"] if pods else None

"""The Kubernetes backend driven by the real dispatcher against the simulated cluster (T1).

The official client talks HTTP to an in-process API server; a simulated
kubelet runs each attempt's script. Assertions are on what the server holds
and received, and on the attempt records.
"""

from __future__ import annotations

from dataclasses import replace

from kubernetes.client import CoreV1Api

from catchup_assets.backends.kubernetes.names import job_name, labels, pvc_name
from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit import worker as worker_sh
from kit.k8s_backend import NS, SETTINGS, A, B, C, D, SimClock, backend, chain, flat, medida, mission
from kit.twin import check_twin
from kubesim.kube_script import Script, Usage


def test_twin_of_the_local_e2e_oom_resume_and_a_condemned_range(cluster, tmp_path):
    api, kubelet = cluster
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    check_twin(cfg, result)  # the same on the real control plane: tests/k8s/test_backend_real_plane.py
    # What the server holds afterwards: no Job left (L2), only the condemned range's PVC (L3).
    assert api.store.list("jobs", NS) == []
    assert [p["metadata"]["name"] for p in api.store.list("persistentvolumeclaims", NS)] == [pvc_name("m1", C)]


def test_api_requests_per_attempt_stay_flat(cluster, tmp_path):
    """Recorded figure (this mission): one LIST each of Jobs and pods, then a watch poll per pass
    (issue 26 item 2); per attempt a Job create
    and delete, a PVC create (409 after the first), one final log read, plus a
    PVC delete per completed range: 22 + 5 log reads (the reclaimed pod went
    unread with its node) over 6 attempts = 4.5 per attempt (target <= 6). No
    running pod's log is read, save one about to go. Per node, not per attempt:
    one GET of the Node (its kubelet's address, then cached) and the kubelet
    summaries, which go to the kubelet, not the API server."""
    api, kubelet = cluster
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    counts = api.requests.snapshot()
    attempts = sum(r.attempts for r in result.results.values())
    # Issue 26 item 2: the Jobs and pods are listed once, then watched, one poll per pass each.
    assert counts[("list", "jobs")] == counts[("list", "pods")] == 1
    assert 0 < counts[("watch", "jobs")] < result.passes and 0 < counts[("watch", "pods")] < result.passes
    per_attempt = sum(n for (verb, res), n in counts.items() if verb not in ("list", "watch") and res != "nodes")
    per_attempt /= attempts
    assert per_attempt <= 6, sorted(counts.items())
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    nodes = {r.node for r in records.values() if r.node}
    reclaimed = {r.node for r in records.values() if r.outcome == "disrupted"}
    # Each Node read once, however many passes sampled it; a reclaimed one once more, to learn it is gone.
    assert 0 < counts[("get", "nodes")] <= len(nodes) + len(reclaimed)
    summaries = kubelet.endpoints.requests.count("get", "nodes/stats")
    assert counts[("get", "nodes")] <= summaries <= result.passes * len(nodes)
    # The reclaimed pod, Running in the API till PodGC, is about to go; but its node is read as gone, and the
    # API server answers its log with the node's 404 (pod.LogLocation): no pass asks again (issue 34).
    gone = [r for r in api.requests.recent if r[3] == "pods/log" and r[4] == 404]
    assert gone == []


def test_L5_transient_api_errors_are_retried_and_never_charged_to_a_range(cluster, tmp_path):
    api, kubelet = cluster
    api.faults.add(status=500, verb="list", resource="pods", count=2)
    api.faults.add(status=503, verb="create", resource="jobs", count=1)
    api.faults.add(status=429, verb="delete", resource="jobs", count=1, retry_after=1)
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert result.condemned.keys() == {C}
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert sorted(r.outcome for r in records.values()) == sorted(["oom", "ok", "disrupted", "ok", "failed", "ok"])


def test_L11_a_job_created_by_someone_else_is_adopted_and_holds_its_slot(cluster, tmp_path):
    api, kubelet = cluster
    cfg = mission(tmp_path, parallelism=2)
    prepared = prepare(cfg)
    first = backend(api, kubelet, tmp_path / "other")
    # Another dispatcher of the mission created attempt 1 of the tip range first.
    other = Dispatcher(
        DispatchConfig(replace(cfg, parallelism=1), prepared.ordered[:1]),
        first,
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=SimClock(kubelet),
    )
    other.pass_once()
    assert len(api.store.list("jobs", NS)) == 1
    live_max = []
    b = backend(api, kubelet, tmp_path)
    observe = b.observe

    def counting_observe():
        states = observe()
        live_max.append(sum(s.live for s in states))
        return states

    b.observe = counting_observe
    result = run_mission(prepared, b, clock=SimClock(kubelet))
    assert result.condemned.keys() == {C}
    assert max(live_max) <= 2
    # Six attempts in all (A and B twice): the adopted one was seen live, never created again.
    assert api.requests.count("create", "jobs") == 6


def test_a_config_fault_stops_new_dispatches_with_its_cause(cluster, tmp_path):
    api, kubelet = cluster
    kubelet.script = lambda job: Script(image_pull_error=True)
    cfg = mission(tmp_path, parallelism=2)
    b = backend(api, kubelet, tmp_path, config_error_seconds=60)
    result = run_mission(prepare(cfg), b, clock=SimClock(kubelet))
    assert api.requests.count("create", "jobs") == 2  # never more than the first wave
    # Every range is left for after the fix, each naming the cause; none spent a budget on it.
    assert {r.status for r in result.results.values()} == {"not_run"}
    assert all("ImagePullBackOff" in r.reason for r in result.results.values())
    assert sorted(r.attempts for r in result.results.values()) == [0, 0, 1, 1]
    assert api.store.list("jobs", NS) == []  # the stuck attempts were ended and released


def test_L11_two_dispatchers_over_disjoint_ranges_share_one_cap_by_counting_live_jobs(cluster, tmp_path):
    api, kubelet = cluster
    kubelet.script = lambda job: Script(duration=100, memory=flat(1 * GiB, 2 * GiB))
    cfg = mission(tmp_path, parallelism=2)
    prepared = prepare(cfg)
    clock = SimClock(kubelet)
    halves = [prepared.ordered[:2], prepared.ordered[2:]]
    dispatchers = [
        Dispatcher(
            DispatchConfig(cfg, half),
            backend(api, kubelet, tmp_path / f"d{i}"),
            RecordStore(Store(cfg.storage_root), "m1"),
            clock=clock,
        )
        for i, half in enumerate(halves)
    ]
    most = 0
    for _ in range(60):
        for d in dispatchers:
            d.pass_once()
        most = max(most, sum(1 for j in api.store.list("jobs", NS) if not j["status"].get("conditions")))
        clock.sleep(10)
    assert most == 2  # one cap between them, counted from the Jobs themselves
    assert api.requests.count("create", "jobs") == 4 and api.store.list("jobs", NS) == []


def test_an_unschedulable_attempt_ends_with_its_cause_and_is_retried(cluster, tmp_path):
    api, kubelet = cluster
    # Nothing can hold the tip range's pod: its tier has no node.
    for n in range(3):
        kubelet.remove_node(f"nebula-{n}")
    cfg = mission(tmp_path, parallelism=4, retry=RetryPolicy(environmental=1))
    result = run_mission(
        prepare(cfg), backend(api, kubelet, tmp_path, unschedulable_seconds=120), clock=SimClock(kubelet)
    )
    assert set(result.condemned) == {A, B, C, D}
    for r in result.results.values():
        assert "rejected" in r.reason and "Unschedulable" in r.reason and r.attempts == 2
    assert api.store.list("jobs", NS) == []  # each stuck attempt was deleted, not left pending


POD_SECURITY = (
    'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "catchup" must set '
    "securityContext.allowPrivilegeEscalation=false)"
)


def refuse_first_of(kubelet, key: str) -> None:
    """Admission refuses the pod of `key`'s first attempt; every other attempt runs the twin's script."""
    twin = kubelet.script

    def script(job):
        labels = job["metadata"]["labels"]
        if labels["catchup.stellar.org/range-key"] == key and labels["catchup.stellar.org/attempt"] == "1":
            return Script(reject=POD_SECURITY)
        return twin(job)

    kubelet.script = script


def test_L4_a_job_whose_pod_admission_refuses_ends_rejected_naming_the_refusal_and_is_retried(cluster, tmp_path):
    """The Job controller only says so in a FailedCreate event on the Job: no pod, no condition, no deadline.
    Seen before the backend read those events: 1 Job, 0 pods, the range never ended."""
    api, kubelet = cluster
    refuse_first_of(kubelet, D)
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    first, second = chain(records, D)
    assert first.outcome == "rejected" and "FailedCreate" in first.reason
    assert 'is forbidden: violates PodSecurity "restricted:latest"' in first.reason  # the admission's own words
    assert second.outcome == "ok" and D in result.done  # charged to the environmental budget, retried
    # Found within the limit (120 s) and a pass of it; its events read once, not every pass.
    assert first.finished_at is None or first.finished_at - first.started_at <= 130
    assert api.requests.count("list", "events") == 1


def test_L31_a_pod_about_to_go_is_read_at_once_while_it_is_still_there(cluster, tmp_path):
    """No running pod is read, save one about to go: a pod marked for deletion is read on every
    pass until it goes, so what it printed reaches its own record (its volume keeps the log too,
    but the next attempt's copy comes after the record)."""
    api, kubelet = cluster

    def evicted_then_ok(job):
        attempt = int(job["metadata"]["labels"]["catchup.stellar.org/attempt"])
        if attempt == 1:  # an Eviction API call: DisruptionTarget, then deleted after its grace
            return Script(
                duration=200,
                disrupt="EvictionByEvictionAPI",
                disrupt_mode="delete",
                grace=30,
                memory=flat(1 * GiB, 2 * GiB),
                lines=[
                    (0.0, "RESUME DECLINED: no range marker in the data dir"),
                    *[(150.0, line) for line in medida(4242)],
                ],
            )
        return Script(
            duration=100,
            memory=flat(1 * GiB, 2 * GiB),
            lines=["RESUME: range x from LCL 59940000 toward target 59968000"],
        )

    kubelet.script = evicted_then_ok
    cfg = mission(tmp_path, span=MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320))
    run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    first = records[(A, 1)]
    assert first.outcome == "disrupted"
    assert first.tx_apply_count == 4242 and first.fresh_start is True  # read before the pod went


def test_L4_a_pod_that_fills_its_node_s_disk_is_evicted_not_disrupted(cluster, tmp_path):
    """The kubelet marks the node-pressure eviction DisruptionTarget/TerminationByKubelet,
    but its message names our container as the disk hog: the range needs more disk."""
    api, kubelet = cluster

    def disk_hog_then_ok(job):
        if job["metadata"]["labels"]["catchup.stellar.org/attempt"] == "1":
            return Script(duration=120, evict_ephemeral=True, memory=[(0.0, Usage(GiB, 2 * GiB, 95 * GiB))])
        return Script(duration=100, memory=flat(1 * GiB, 2 * GiB))

    kubelet.script = disk_hog_then_ok
    cfg = mission(tmp_path, span=MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320))
    run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    first = records[(A, 1)]
    assert [records[(A, a)].outcome for a in (1, 2)] == ["evicted", "ok"]
    assert "TerminationByKubelet" in first.reason and "larger consumption of ephemeral-storage" in first.reason
    assert first.peak_ephemeral_bytes == 95 * GiB


def test_L5_cut_off_bodies_and_410s_are_retried_and_never_charged(cluster, tmp_path):
    """A LIST, a Node or a kubelet summary cut off mid-body, and 410 Gone on LIST and on deletes.
    A summary cut off is not retried in its pass: the next sample, stats_interval later, reads it."""
    api, kubelet = cluster
    api.faults.add(truncate=True, verb="list", resource="jobs", count=2)
    api.faults.add(truncate=True, verb="list", resource="pods", count=1)
    api.faults.add(truncate=True, verb="get", resource="nodes", count=1)
    kubelet.endpoints.faults.add(truncate=True, resource="nodes/stats", count=2)
    api.faults.add(status=410, verb="list", resource="pods", count=1)
    api.faults.add(status=410, verb="delete", resource="jobs", count=1)
    api.faults.add(status=410, verb="delete", resource="persistentvolumeclaims", count=1)
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert api.faults.pending() == kubelet.endpoints.faults.pending() == 0  # every fault was met
    assert result.condemned.keys() == {C}
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert sorted(r.outcome for r in records.values()) == sorted(["oom", "ok", "disrupted", "ok", "failed", "ok"])
    assert all(r.peak_anon_bytes for r in records.values() if r.outcome == "ok")  # later samples read them


def test_the_chart_s_rbac_grants_exactly_what_the_backend_calls(cluster, tmp_path):
    """Least privilege, measured: every (verb, resource) the backend sent the API server, and every
    one the kubelets authorized (as they ask the API server, by SubjectAccessReview), during a mission
    with every kind of outcome, against every grant of the chart's Role and ClusterRole."""
    import helm_python as helm
    from kubernetes.client import V1ConfigMap, V1ObjectMeta

    from kit.chart import CHART, render

    api, kubelet = cluster
    # The chart's worker ConfigMap, made by the chart's installer, not by the mission's account.
    CoreV1Api(api.api_client).create_namespaced_config_map(
        NS, V1ConfigMap(metadata=V1ObjectMeta(name="cu-worker"), data={"entrypoint.sh": "", "stellar-core.cfg": ""})
    )
    # A Job of someone else's under A's first attempt (issue 45): its 409 is read back (get jobs), and refused.
    api.store.create(
        "jobs",
        NS,
        {
            "metadata": {"name": job_name("m1", A, 1), "labels": labels("m1", A, 1)},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "x", "image": "x"}]}}},
        },
    )
    api.requests.reset()
    refuse_first_of(kubelet, D)  # a refusal read from its Job's events
    b = backend(api, kubelet, tmp_path, settings=replace(SETTINGS, configmap="cu-worker"))
    result = run_mission(prepare(mission(tmp_path)), b, clock=SimClock(kubelet))
    assert result.condemned.keys() == {C}  # the twin mission: oom, reclaim, failure, success; and a refusal
    # Then its cleanup (issue 21): the condemned range's PVC, found by the mission's label, deleted.
    from catchup_assets.mission.cleanup import cleanup, plan_cleanup
    from catchup_assets.mission.saved import save_mission

    save_mission(Store(mission(tmp_path).storage_root), mission(tmp_path))
    plan = plan_cleanup(mission(tmp_path).storage_root, "m1", b, everything=True, now=kubelet.clock())
    assert [o.range_key for o in plan.delete] == [C]
    cleanup(plan, b)
    assert api.store.count("persistentvolumeclaims", NS) == 0
    by_kubelets = set(kubelet.endpoints.requests.snapshot())
    assert by_kubelets == {("get", "nodes/stats")}  # /stats/summary only: never /pods, /containerLogs, ...
    used = set(api.requests.snapshot()) | by_kubelets
    with helm.Chart.load(CHART) as chart:
        docs = render(chart)
    granted = {
        (verb, resource)
        for doc in docs
        if doc["kind"] in ("Role", "ClusterRole")
        for rule in doc["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert used == granted, f"unused grants {sorted(granted - used)}; missing grants {sorted(used - granted)}"


def test_a_mission_whose_every_range_fails_the_same_way_stops_with_one_cause(cluster, tmp_path):
    """Every range's pod exits 1 with the same FATAL line (a broken core config): the breaker stops
    the mission after three, names stellar-core's error, and charges no range's budget."""
    api, kubelet = cluster
    fatal = '{now} [default FATAL] Got an exception: Failed to parse "stellar-core.cfg": unknown key LOG_COLOR'
    kubelet.script = lambda job: Script(duration=30, exit_code=1, lines=[fatal])
    cfg = mission(tmp_path, parallelism=1, breaker_attempts=3)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert result.condemned == {} and result.done == []
    cause = next(iter(result.results.values())).reason
    assert "circuit breaker: 3 attempts in a row" in cause and "unknown key LOG_COLOR" in cause
    assert api.requests.count("create", "jobs") == 3  # the fourth range never started
    records = RecordStore(Store(cfg.storage_root), "m1")
    assert set(records.load_resets()) == {k for k, _ in records.load()[0]}


def test_L4_a_core_that_exits_0_short_of_its_target_leaves_its_range_failed(cluster, tmp_path):
    """Exit 0 is not done (issue 24 item 6). A's pod prints and exits exactly as the real
    entrypoint.sh did over the simulated core told to stop short (run here, beforehand): the
    backend reads that pod, and A is failed, condemned at once, naming the ledger it reached."""
    data = worker_sh.prepare(tmp_path / "data", None, None)
    env = worker_sh.worker_env(data, key=A, target="59968000", count="64320", SIM_EXIT_EARLY="59968000=59930000")
    worker = worker_sh.run(worker_sh.SHELLS[0], env)
    assert worker.returncode == 65, worker.stderr
    ran = Script(duration=60, exit_code=worker.returncode, lines=worker.stdout.splitlines())
    api, kubelet = cluster
    kubelet.script = lambda job: ran if job["metadata"]["labels"]["catchup.stellar.org/range-key"] == A else Script()
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert result.condemned.keys() == {A} and sorted(result.done) == sorted([B, C, D])
    [rec] = chain(RecordStore(Store(cfg.storage_root), "m1").load()[0], A)
    assert rec.outcome == "failed" and rec.exit_code == 65
    assert "WORKER FAILED: catchup exited 0 at LCL 59930000, short of target 59968000" in rec.reason
    assert "failed budget spent" in result.condemned[A]

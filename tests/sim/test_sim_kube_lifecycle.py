"""The simulated kubelet and Job controller, seen through the official client (T1).

Each scenario is a `Script` handed to the kubelet; the assertions are the
shapes the real API reports for it, because the backend's classifier (L4)
will be written against exactly these.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from kubernetes.client import ApiException, BatchV1Api, CoreV1Api

from catchup_assets.core.units import GiB
from kit.sim_kube import job_manifest
from kubesim.kube_api import KubeApiServer
from kubesim.kube_logs import MAX_ENTRY
from kubesim.kube_script import Script, Usage
from kubesim.kubelet import Kubelet

NANO_STAMP = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z $")


@pytest.fixture
def sim():
    """(api, kubelet, batch, core, scripts): scripts[job name] sets that job's Script."""
    scripts: dict[str, Script] = {}
    with KubeApiServer() as api:
        kubelet = Kubelet(
            api.store, script=lambda job: scripts.get(job["metadata"]["name"], Script(duration=30)), stats_period=0
        )
        kubelet.add_node("n1", labels={"tier": "small"})
        yield api, kubelet, BatchV1Api(api.api_client), CoreV1Api(api.api_client), scripts


def only_pod(core: CoreV1Api, job: str):
    pods = core.list_namespaced_pod("ns", label_selector=f"job-name={job}").items
    assert len(pods) == 1, pods
    return pods[0]


def conditions(obj) -> dict:
    return {c.type: c for c in obj.status.conditions or []}


def test_job_becomes_a_labelled_pod_that_runs_to_succeeded_with_its_own_timestamps(sim):
    """L14, L23: labels reach the pod; duration = finishedAt - startTime."""
    api, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=42, start_delay=5)
    job = batch.create_namespaced_job("ns", job_manifest("r1"))
    t0 = job.metadata.creation_timestamp
    kubelet.step()
    pod = only_pod(core, "r1")
    assert pod.metadata.name.startswith("r1-") and len(pod.metadata.name) == len("r1-") + 5
    assert pod.metadata.labels["range"] == "r1" and pod.metadata.labels["mission"] == "m1"
    assert pod.metadata.labels["controller-uid"] == job.metadata.uid
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Job", "r1", job.metadata.uid, True)
    assert pod.status.phase == "Pending" and pod.spec.node_name == "n1"
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    kubelet.advance(10, tick=10)  # one coarse step: the times still come from the script
    pod = only_pod(core, "r1")
    assert pod.status.phase == "Running"
    assert pod.status.container_statuses[0].state.running.started_at == t0 + timedelta(seconds=5)
    assert batch.read_namespaced_job("r1", "ns").status.active == 1
    kubelet.advance(100, tick=50)
    pod = only_pod(core, "r1")
    term = pod.status.container_statuses[0].state.terminated
    assert pod.status.phase == "Succeeded" and (term.exit_code, term.reason) == (0, "Completed")
    assert pod.status.start_time == t0
    assert term.started_at == t0 + timedelta(seconds=5)
    assert term.finished_at == t0 + timedelta(seconds=47)
    st = batch.read_namespaced_job("r1", "ns").status
    assert (st.succeeded, st.failed, st.active) == (1, None, None)
    assert st.start_time == t0 and st.completion_time is not None
    assert [c.type for c in st.conditions] == ["SuccessCriteriaMet", "Complete"]


def test_oom_killed_pod_and_backoff_limit_exceeded_job(sim):
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=20, oom=True)
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.advance(25, tick=5)
    pod = only_pod(core, "r1")
    term = pod.status.container_statuses[0].state.terminated
    assert pod.status.phase == "Failed" and (term.exit_code, term.reason) == (137, "OOMKilled")
    job = batch.read_namespaced_job("r1", "ns")
    conds = conditions(job)
    assert conds["FailureTarget"].reason == conds["Failed"].reason == "BackoffLimitExceeded"
    assert job.status.failed == 1 and job.status.completion_time is None


def test_memory_curve_above_the_limit_ooms_at_the_crossing(sim):
    """L6: the limit, not the script, decides: 4 GiB OOMs a 5 GiB range, 6 GiB does not."""
    _, kubelet, batch, core, scripts = sim
    curve = [(0.0, Usage(0, 0)), (100.0, Usage(5 * GiB, 6 * GiB))]
    scripts["small"] = scripts["big"] = Script(duration=100, memory=curve)
    batch.create_namespaced_job("ns", job_manifest("small"))
    batch.create_namespaced_job(
        "ns", job_manifest("big", container={"resources": {"requests": {"memory": "6Gi"}, "limits": {"memory": "6Gi"}}})
    )
    kubelet.advance(120, tick=20)
    small = only_pod(core, "small").status.container_statuses[0].state.terminated
    big = only_pod(core, "big").status.container_statuses[0].state.terminated
    assert small.reason == "OOMKilled" and (small.finished_at - small.started_at).seconds == 80
    assert big.reason == "Completed"


def test_disruption_target_then_drain_exit_3(sim):
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=20, disrupt="TerminationByKubelet", grace=5)
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.advance(21)
    pod = only_pod(core, "r1")
    target = conditions(pod)["DisruptionTarget"]
    assert (target.status, target.reason) == ("True", "TerminationByKubelet")
    assert pod.status.phase == "Running"  # SIGTERM sent, still draining
    kubelet.advance(5)
    pod = only_pod(core, "r1")
    term = pod.status.container_statuses[0].state.terminated
    assert pod.status.phase == "Failed" and term.exit_code == 3
    assert pod.status.reason == "Terminated"


def test_preempted_pod_is_deleted_and_the_job_counts_a_failure(sim):
    api, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=20, disrupt="PreemptionByScheduler", disrupt_mode="delete", grace=3)
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.advance(21)
    pod = only_pod(core, "r1")
    assert pod.metadata.deletion_timestamp is not None
    assert conditions(pod)["DisruptionTarget"].reason == "PreemptionByScheduler"
    kubelet.advance(3)
    assert core.list_namespaced_pod("ns").items == []
    job = batch.read_namespaced_job("r1", "ns")
    assert job.status.failed == 1 and conditions(job)["Failed"].reason == "BackoffLimitExceeded"


def test_node_gone_leaves_its_pod_running_until_pod_gc_fails_and_deletes_it(sim):
    """As the real PodGC (gc_controller.go gcOrphaned): quarantine 40 s, then Failed with
    DisruptionTarget DeletionByPodGC, then deleted; the Job counts the failure then, not before."""
    api, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=20, disrupt="TerminationByKubelet", disrupt_mode="node_gone")
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.advance(25)
    assert api.store.count("nodes") == 0
    with pytest.raises(ApiException) as err:
        core.read_node("n1")
    assert err.value.status == 404
    pod = only_pod(core, "r1")  # nobody left to say otherwise: Running as its kubelet last wrote it
    assert pod.status.phase == "Running" and batch.read_namespaced_job("r1", "ns").status.failed is None
    since = int(api.store.resource_version)
    kubelet.advance(40)
    assert api.store.count("pods") == 0
    assert batch.read_namespaced_job("r1", "ns").status.failed == 1
    last = [json.loads(c.encoded) for c in api.store.watch.since(since) if c.plural == "pods"][-1]
    assert last["status"]["phase"] == "Failed"
    conditions = {c["type"]: (c.get("reason"), c.get("message")) for c in last["status"]["conditions"]}
    assert conditions["DisruptionTarget"] == ("DeletionByPodGC", "PodGC: node no longer exists")


def test_ephemeral_eviction_shape(sim):
    """Over its own limit: Evicted with the pod-level message and no DisruptionTarget
    (kubelet podEphemeralStorageLimitEviction passes no condition to evictPod)."""
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=20, evict_ephemeral=True)
    limits = {"memory": "4Gi", "ephemeral-storage": "40Gi"}
    batch.create_namespaced_job("ns", job_manifest("r1", container={"resources": {"limits": limits}}))
    kubelet.step()
    kubelet.advance(20)
    pod = only_pod(core, "r1")
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
    assert pod.status.message == ("Pod ephemeral local storage usage exceeds the total limit of containers 40Gi. ")
    assert not [c for c in pod.status.conditions if c.type == "DisruptionTarget"]
    term = pod.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (137, "Error")  # 137 but not an OOM


@pytest.mark.parametrize(
    "script, resource, names_us",
    [
        (Script(duration=20, evict_ephemeral=True, memory=[(0, Usage(GiB, GiB, 91 * GiB))]), "ephemeral-storage", True),
        (Script(duration=20, evict_memory_pressure=True, memory=[(0, Usage(GiB, GiB, GiB))]), "memory", False),
    ],
)
def test_node_pressure_eviction_shape(sim, script, resource, names_us):
    """The node ran short: Evicted, and DisruptionTarget/TerminationByKubelet with the same
    message (eviction_manager.go synchronize); a container over its request is named."""
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = script
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.step()
    kubelet.advance(20)
    pod = only_pod(core, "r1")
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
    assert pod.status.message.startswith(f"The node was low on resource: {resource}. Threshold quantity: ")
    assert (
        "Container catchup was using 91Gi, request is 0, has larger consumption of "
        "ephemeral-storage. " in pod.status.message
    ) is names_us
    cond = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
    assert (cond.status, cond.reason, cond.message) == ("True", "TerminationByKubelet", pod.status.message)


def test_pod_deadline_is_deadline_exceeded_on_the_pod(sim):
    """L8: activeDeadlineSeconds on the pod: the pod says DeadlineExceeded."""
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=600, sigterm_exit_code=3)
    batch.create_namespaced_job("ns", job_manifest("r1", activeDeadlineSeconds=60))
    kubelet.step()
    kubelet.advance(61, tick=30)
    pod = only_pod(core, "r1")
    assert (pod.status.phase, pod.status.reason) == ("Failed", "DeadlineExceeded")
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 3 and (term.finished_at - term.started_at).seconds == 60
    assert conditions(batch.read_namespaced_job("r1", "ns"))["Failed"].reason == "BackoffLimitExceeded"


def test_job_deadline_counts_pending_time_and_fails_the_job(sim):
    """L8: on the Job, the deadline also runs while the pod cannot even schedule."""
    api, kubelet, batch, core, _ = sim
    batch.create_namespaced_job(
        "ns", job_manifest("r1", nodeSelector={"tier": "huge"}, job_spec={"activeDeadlineSeconds": 30})
    )
    kubelet.step()
    sched = conditions(only_pod(core, "r1"))["PodScheduled"]
    assert (sched.status, sched.reason) == ("False", "Unschedulable")
    assert "didn't match Pod's node affinity/selector" in sched.message
    kubelet.advance(31, tick=10)
    job = batch.read_namespaced_job("r1", "ns")
    assert conditions(job)["Failed"].reason == "DeadlineExceeded"
    assert api.store.count("pods") == 0


def test_taints_tolerations_and_capacity_decide_placement(sim):
    _, kubelet, batch, core, _ = sim
    taint = {"key": "tier", "value": "large", "effect": "NoSchedule"}
    kubelet.add_node("big", labels={"tier": "large"}, taints=[taint], allocatable={"memory": "8Gi"})
    tolerate = [{"key": "tier", "operator": "Equal", "value": "large", "effect": "NoSchedule"}]
    for name in ("a", "b"):
        batch.create_namespaced_job(
            "ns",
            job_manifest(
                name,
                nodeSelector={"tier": "large"},
                tolerations=tolerate,
                container={"resources": {"requests": {"memory": "6Gi"}}},
            ),
        )
    batch.create_namespaced_job("ns", job_manifest("c", nodeSelector={"tier": "large"}))
    kubelet.step()
    assert only_pod(core, "a").spec.node_name == "big"
    assert "Insufficient memory" in conditions(only_pod(core, "b"))["PodScheduled"].message
    untolerated = conditions(only_pod(core, "c"))["PodScheduled"].message
    assert "1 node(s) had untolerated taint {tier: large}" in untolerated


def test_image_pull_error_waits_forever_and_logs_answer_400(sim):
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(image_pull_error=True)
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.step()
    assert only_pod(core, "r1").status.container_statuses[0].state.waiting.reason == "ErrImagePull"
    kubelet.advance(300, tick=60)
    pod = only_pod(core, "r1")
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ImagePullBackOff"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log(pod.metadata.name, "ns")
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == (
        f'container "catchup" in pod "{pod.metadata.name}" is waiting to start: trying and failing to pull image'
    )


def test_missing_configmap_is_a_config_error_until_it_exists(sim):
    _, kubelet, batch, core, _ = sim
    env = [{"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "core-cfg", "key": "k"}}}]
    batch.create_namespaced_job("ns", job_manifest("r1", container={"env": env}))
    kubelet.advance(5)
    waiting = only_pod(core, "r1").status.container_statuses[0].state.waiting
    assert (waiting.reason, waiting.message) == ("CreateContainerConfigError", 'configmap "core-cfg" not found')
    core.create_namespaced_config_map("ns", {"metadata": {"name": "core-cfg"}, "data": {"k": "v"}})
    kubelet.advance(1)
    assert only_pod(core, "r1").status.phase == "Running"


def test_job_failed_with_no_pod_and_admission_rejection(sim):
    """L4 `unknown` and `rejected`: one Job fails podless, one never gets a pod."""
    api, kubelet, batch, core, scripts = sim
    scripts["ghost"] = Script(no_pod=True)
    scripts["denied"] = Script(reject="exceeded quota: compute, requested: memory=4Gi")
    batch.create_namespaced_job("ns", job_manifest("ghost"))
    batch.create_namespaced_job("ns", job_manifest("denied"))
    kubelet.advance(10)
    assert api.store.count("pods") == 0
    assert conditions(batch.read_namespaced_job("ghost", "ns"))["Failed"].reason == "BackoffLimitExceeded"
    events = core.list_namespaced_event("ns", field_selector="involvedObject.name=denied").items
    assert [e.reason for e in events] == ["FailedCreate"] and "exceeded quota" in events[0].message
    assert not batch.read_namespaced_job("denied", "ns").status.conditions


def test_on_failure_restarts_in_place_until_the_backoff_limit(sim):
    """L1: with OnFailure an OOM restarts in place; only restartCount shows it."""
    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=10, oom=True)
    manifest = job_manifest("r1", job_spec={"backoffLimit": 2})
    manifest["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    batch.create_namespaced_job("ns", manifest)
    kubelet.advance(45)
    status = only_pod(core, "r1").status
    assert status.phase == "Running" and status.container_statuses[0].restart_count >= 1
    assert status.container_statuses[0].last_state.terminated.reason == "OOMKilled"
    kubelet.advance(120)
    assert conditions(batch.read_namespaced_job("r1", "ns"))["Failed"].reason == "BackoffLimitExceeded"


def read_log(api: KubeApiServer, pod: str, **query) -> bytes:
    """GET .../log with any query, sinceTime included (the client has no argument for it)."""
    resp = api.api_client.call_api(
        "/api/v1/namespaces/{namespace}/pods/{name}/log",
        "GET",
        {"namespace": "ns", "name": pod},
        list(query.items()),
        {"Accept": "*/*"},
        _preload_content=False,
        _return_http_data_only=True,
    )
    return resp.data


def test_logs_400_while_creating_then_readable_until_the_pod_is_deleted(sim):
    """L30: Pending answers 400; Running and finished pods serve their output."""
    api, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=10, start_delay=5, lines=[(0, "first"), (8, "last")])
    batch.create_namespaced_job("ns", job_manifest("r1"))
    batch.create_namespaced_job("ns", job_manifest("nowhere", nodeSelector={"tier": "none"}))
    kubelet.step()
    # No node yet, so no kubelet to ask: the API server answers an empty 200.
    assert read_log(api, only_pod(core, "nowhere").metadata.name) == b""
    name = only_pod(core, "r1").metadata.name
    with pytest.raises(ApiException) as err:
        read_log(api, name)
    assert err.value.status == 400 and json.loads(err.value.body)["message"] == (
        f'container "catchup" in pod "{name}" is waiting to start: ContainerCreating'
    )
    kubelet.advance(6)
    assert read_log(api, name) == b"first\n"
    kubelet.advance(20)
    assert only_pod(core, "r1").status.phase == "Succeeded"
    assert read_log(api, name) == b"first\nlast\n"
    batch.delete_namespaced_job("r1", "ns", propagation_policy="Background")
    with pytest.raises(ApiException) as err:
        read_log(api, name)
    assert err.value.status == 404


def test_since_time_is_whole_seconds_and_inclusive_with_nano_timestamps(sim):
    """L30: a sinceTime resume re-reads the whole second it names: dedupe the overlap."""
    api, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=10, lines=[(0.0, "a"), (1.25, "b"), (1.75, "c"), (3.0, "d")])
    job = batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.step()
    kubelet.advance(5)
    name, t0 = only_pod(core, "r1").metadata.name, job.metadata.creation_timestamp
    lines = read_log(api, name, timestamps="true").splitlines()
    assert [ln[31:] for ln in lines] == [b"a", b"b", b"c", b"d"]
    assert all(NANO_STAMP.match(ln[:31]) for ln in lines)
    assert lines[1][:31] == (t0 + timedelta(seconds=1.25)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z ").encode()
    since = (t0 + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert read_log(api, name, sinceTime=since) == b"b\nc\nd\n"
    # A fractional sinceTime is cut to the second on its way to the kubelet.
    frac = (t0 + timedelta(seconds=1.8)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert read_log(api, name, sinceTime=frac) == b"b\nc\nd\n"
    exact = (t0 + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert read_log(api, name, sinceTime=exact) == b"d\n"
    assert read_log(api, name, tailLines="2") == b"c\nd\n"
    assert read_log(api, name, limitBytes="3") == b"a\nb"


def test_a_multi_megabyte_carriage_return_line_arrives_in_16k_entries(sim):
    """L29: one 'line' of progress meter, cut by the runtime, stamped per piece."""
    api, kubelet, batch, core, scripts = sim
    meter = "\r".join(f"{i:7d} / 999999 bytes" for i in range(100_000))  # ~2.3 MB
    scripts["r1"] = Script(duration=10, lines=[(0, "start"), (1, meter), (2, "end")])
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.step()
    kubelet.advance(3)
    name = only_pod(core, "r1").metadata.name
    assert read_log(api, name) == f"start\n{meter}\nend\n".encode()
    stamped = read_log(api, name, timestamps="true")
    pieces = -(-len(meter) // MAX_ENTRY)
    assert len(re.findall(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", stamped)) == pieces + 2
    assert stamped.count(b"\n") == 3


def test_stats_summary_reports_running_pods_of_that_node_from_the_curve(sim):
    """L19: rss, working set and ephemeral per pod container, one summary per node
    (served over HTTPS by kubelet_server.py, tested in test_sim_kubelet_server.py)."""
    api, kubelet, batch, core, scripts = sim
    kubelet.add_node("n2", labels={"tier": "large"})
    curve = [(0.0, Usage(0, 0, 0)), (100.0, Usage(1 * GiB, 4 * GiB, 10 * GiB))]
    scripts["a"] = Script(duration=100, memory=curve)
    scripts["b"] = Script(duration=100, memory=curve)
    scripts["done"] = Script(duration=5)
    for name, tier in (("a", "small"), ("b", "large"), ("done", "small")):
        batch.create_namespaced_job("ns", job_manifest(name, nodeSelector={"tier": tier}))
    kubelet.step()
    kubelet.advance(25, tick=5)

    def summary(node: str) -> dict:
        return json.loads(json.dumps(kubelet.stats_summary(node)))  # as it goes over the wire

    n1 = summary("n1")
    assert n1["node"]["nodeName"] == "n1"
    assert [p["podRef"]["name"] for p in n1["pods"]] == [only_pod(core, "a").metadata.name]
    pod = n1["pods"][0]
    mem = pod["containers"][0]["memory"]
    assert pod["containers"][0]["name"] == "catchup"
    assert (mem["rssBytes"], mem["workingSetBytes"]) == (GiB // 4, GiB)
    assert mem["usageBytes"] >= mem["workingSetBytes"]
    assert pod["ephemeral-storage"]["usedBytes"] == int(2.5 * GiB)
    assert pod["podRef"]["uid"] == only_pod(core, "a").metadata.uid
    assert [p["podRef"]["name"] for p in summary("n2")["pods"]] == [only_pod(core, "b").metadata.name]
    kubelet.stats_period = 10.0  # the kubelet samples on its housekeeping tick
    kubelet.advance(9)  # 34 s into the run: the last sample is from 30 s
    assert summary("n1")["pods"][0]["containers"][0]["memory"]["rssBytes"] == int(0.3 * GiB)


def test_issue25_pod_log_carries_the_catchup_phase_lines_at_their_times(sim):
    """The default pod log prints stellar-core's phase lines as the run goes: its setup reads back."""
    from catchup_assets.core.measure.logparse import parse_worker_log

    _, kubelet, batch, core, scripts = sim
    scripts["r1"] = Script(duration=1500)
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.advance(1600, tick=10)
    pod = only_pod(core, "r1").metadata.name
    text = core.read_namespaced_pod_log(pod, "ns", _preload_content=False).data.decode()
    for message in ("Downloading history archive state: ", "[History INFO] Applying buckets", "ApplyBuckets : done"):
        assert message in text
    setup = parse_worker_log(text.splitlines()).setup_seconds
    assert setup is not None and 0 < setup < 1500

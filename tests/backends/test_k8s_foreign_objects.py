"""Issue 45 item 1 on the simulated API server: what the mission did not make is never adopted.

Pins the issue's failure 1: a Job named `catchup-m1-<range>-a001` created before the first pass, with
the dispatcher's labels but another image and a forged exit report, was read as "adopted" on the
submit's 409 and recorded `done, ok at attempt 1, seconds 5.0`; and two deployments planning one
mission name in one namespace adopted each other's Jobs. Assertions are on what the API server holds
and received, on the attempt records and on the profile built from them.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

import pytest
from kubernetes.client import BatchV1Api, CoreV1Api

from catchup_assets.backends.kubernetes.identity import MissionIdentity
from catchup_assets.backends.kubernetes.names import job_name, labels, pvc_name, range_labels
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.ports import AttemptSpec, ForeignObject, LogUnavailable, Phase
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.foreign import FORGED_TX, FORGER_IMAGE, forged_job, with_forger
from kit.k8s_backend import NS, SETTINGS, A, B, C, SimClock, backend, mission
from kubesim.kube_script import Script


@pytest.mark.timeout(120)
def test_issue45_failure1_a_foreign_job_under_the_next_attempt_s_name_is_never_adopted(cluster, tmp_path, caplog):
    """The foreign Job is made before the first pass, by `kubectl-create`. The range is not advanced by it:
    its attempt 1 is recorded `foreign` (charged to no budget, naming the Job and its maker) and the range
    runs under attempt 2 and on, as it would have; the Job is left alone (not deleted, its pod's log
    never read), and the profile holds no figure from it."""
    api, kubelet = cluster
    kubelet.script = with_forger
    foreign = job_name("m1", A, 1)
    BatchV1Api(api.api_client).create_namespaced_job(NS, forged_job(foreign, A, 1), field_manager="kubectl-create")
    cfg = mission(tmp_path)
    with caplog.at_level(logging.WARNING):
        result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))

    records, done = RecordStore(Store(cfg.storage_root), "m1").load()
    first = records[(A, 1)]
    assert (A, 1) in done and first.outcome == "foreign"
    assert foreign in first.reason and "kubectl-create" in first.reason
    assert first.seconds is None and first.tx_apply_count is None and first.peak_anon_bytes is None
    # A ran as it would have, one number on: an OOM at the unprofiled rung (no rung spent on the
    # foreign attempt), then done on the next.
    assert [records[(A, n)].outcome for n in (2, 3)] == ["oom", "ok"]
    assert records[(A, 2)].memory_limit_bytes < records[(A, 3)].memory_limit_bytes
    assert result.results[A].status == "done" and result.condemned.keys() == {C}
    assert all(r.tx_apply_count != FORGED_TX for r in records.values())

    # Left alone: the API server still holds it, and nothing read its pod's log.
    assert foreign in {j["metadata"]["name"] for j in api.store.list("jobs", NS)}
    forger_pods = {p["metadata"]["name"] for p in api.store.list("pods", NS, f"job-name={foreign}")}
    assert forger_pods, "the kubelet ran the forger's pod"
    assert not [r for r in api.requests.recent if r[3] == "pods/log" and any(p in r[1] for p in forger_pods)]

    # The profile: A's row is its own attempts', none of the forger's figures.
    rows = {r["range_key"]: r for r in build_profile(cfg.storage_root, "m1").profile.to_pylist()}
    assert rows[A]["tx_apply_count"] != FORGED_TX and rows[A]["seconds"] != 5.0
    assert all(FORGED_TX not in r.values() for r in rows.values())

    # Told loudly, once, naming the Job and who made it.
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR and foreign in r.getMessage()]
    assert len(loud) == 1 and "kubectl-create" in loud[0].getMessage()


@pytest.mark.timeout(120)
def test_issue45_failure1_two_deployments_of_one_mission_name_refuse_each_other_s_jobs(cluster, tmp_path):
    """Two storage roots, two nonces, one mission name `m1` in one namespace. Neither observes the other's
    Jobs (no state, not counted live), and a 409 on the other's Job is a foreign object, not an adoption."""
    api, kubelet = cluster
    cfg = mission(tmp_path / "one", parallelism=2)
    other_cfg = mission(tmp_path / "two", parallelism=2)
    # Node-local data: in pvc mode the second would meet the first's PVC of the range, and stop there
    # (test_issue45_failure1_a_foreign_pvc_blocks_its_range_and_is_never_mounted_or_deleted).
    settings = replace(SETTINGS, storage_mode="ephemeral")
    one = backend(api, kubelet, tmp_path / "one", settings=settings)
    two = backend(api, kubelet, tmp_path / "two", settings=settings, identity=MissionIdentity("b0b0" * 8))
    first = Dispatcher(
        DispatchConfig(cfg, prepare(cfg).ordered),
        one,
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=SimClock(kubelet),
    )
    first.pass_once()
    made_by_one = {j["metadata"]["name"] for j in api.store.list("jobs", NS)}
    assert made_by_one == {job_name("m1", A, 1), job_name("m1", B, 1)}
    assert two.observe() == []  # the other deployment's Jobs are none of its attempts

    second = Dispatcher(
        DispatchConfig(other_cfg, prepare(other_cfg).ordered),
        two,
        RecordStore(Store(other_cfg.storage_root), "m1"),
        clock=SimClock(kubelet),
    )
    second.pass_once()  # its attempt 1 of A and B: 409s on the first deployment's Jobs
    recs, _ = RecordStore(Store(other_cfg.storage_root), "m1").load()
    assert {k: r.outcome for k, r in recs.items()} == {(A, 1): "foreign", (B, 1): "foreign"}
    second.pass_once()  # and on under attempt 2, its own
    theirs = {s.attempt_id for s in two.observe()}
    assert theirs == {f"{A}-a002", f"{B}-a002"}
    assert {s.attempt_id for s in one.observe()} == {f"{A}-a001", f"{B}-a001"}
    # The first deployment's Jobs are untouched, and its records know nothing of the second's.
    ours, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert set(ours) == {(A, 1), (B, 1)} and all(r.outcome is None for r in ours.values())


def _spec(range_key: str, attempt: int) -> AttemptSpec:
    return AttemptSpec("m1", range_key, attempt, 59_968_000, 64_320, 2 * GiB, 2 * GiB, "dwarf")


@pytest.mark.timeout(60)
def test_issue45_failure1_a_foreign_pvc_blocks_its_range_and_is_never_mounted_or_deleted(cluster, tmp_path):
    """The range's PVC name has no attempt number to move on to: a PVC of another's under it stops the
    submit (ForeignObject, retry False) before any Job mounts it, and neither release_range nor cleanup
    deletes it."""
    api, kubelet = cluster
    name = pvc_name("m1", A)
    CoreV1Api(api.api_client).create_namespaced_persistent_volume_claim(
        NS,
        {
            "metadata": {"name": name, "labels": range_labels("m1", A)},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        field_manager="kubectl-create",
    )
    b = backend(api, kubelet, tmp_path)
    with pytest.raises(ForeignObject) as refused:
        b.submit(_spec(A, 1))
    assert refused.value.retry is False and name in str(refused.value) and "kubectl-create" in str(refused.value)
    assert api.store.list("jobs", NS) == []  # no Job mounts it
    b.release_range(A)
    assert b.leftovers() == []
    assert [p["metadata"]["name"] for p in api.store.list("persistentvolumeclaims", NS)] == [name]


@pytest.mark.timeout(60)
def test_issue45_failure1_cleanup_lists_and_removes_only_the_mission_s_own_objects(cluster, tmp_path):
    """A foreign Job with the mission's labels is no leftover of it: cleanup never deletes it."""
    api, kubelet = cluster
    foreign = job_name("m1", B, 7)
    BatchV1Api(api.api_client).create_namespaced_job(NS, forged_job(foreign, B, 7), field_manager="kubectl-create")
    b = backend(api, kubelet, tmp_path)
    b.submit(_spec(A, 1))
    found = b.leftovers()
    assert {o.name for o in found} == {job_name("m1", A, 1), pvc_name("m1", A)}
    b.remove(found)
    assert [j["metadata"]["name"] for j in api.store.list("jobs", NS)] == [foreign]


@pytest.mark.timeout(60)
def test_issue45_failure1_a_pod_naming_our_job_as_owner_but_running_another_image_is_no_attempt_s(cluster, tmp_path):
    """ownerReferences are whatever a pod's creator writes: a pod with our labels and our Job's uid as
    owner, running another image, gives the attempt no state, no peaks and no log."""
    api, kubelet = cluster
    kubelet.script = lambda job: Script(duration=600)
    b = backend(api, kubelet, tmp_path)
    b.submit(_spec(A, 1))
    ours = api.store.list("jobs", NS)[0]
    kubelet.advance(5, tick=1)
    assert [s.phase for s in b.observe()] == [Phase.RUNNING]
    CoreV1Api(api.api_client).create_namespaced_pod(
        NS,
        {
            "metadata": {
                "name": "forged-pod",
                "labels": {**labels("m1", A, 1), "job-name": ours["metadata"]["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": ours["metadata"]["name"],
                        "uid": ours["metadata"]["uid"],
                    }
                ],
            },
            "spec": {"containers": [{"name": "catchup", "image": FORGER_IMAGE}], "nodeName": "dwarf-0"},
            "status": {"phase": "Succeeded"},
        },
    )
    kubelet.advance(1, tick=1)
    (state,) = b.observe()
    # Its own pod's state: the forged pod is the newest with its labels and runs too, started later.
    own = next(p for p in api.store.list("pods", NS) if p["metadata"]["name"] != "forged-pod")
    started = own["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert state.attempt_id == f"{A}-a001" and state.phase is Phase.RUNNING
    assert state.started_at == datetime.fromisoformat(started).timestamp()


@pytest.mark.timeout(120)
def test_issue45_failure1_foreign_jobs_under_three_of_a_range_s_names_stop_new_dispatch_naming_the_last(
    cluster, tmp_path
):
    """Someone racing a range's names gets a bounded number of its attempt numbers: after the third
    foreign Job, new dispatch stops (as a blocked dispatch), naming it; no budget was charged, so the range
    is left for a later run, not condemned."""
    api, kubelet = cluster
    kubelet.script = with_forger
    batch = BatchV1Api(api.api_client)
    for n in (1, 2, 3):
        batch.create_namespaced_job(NS, forged_job(job_name("m1", A, n), A, n), field_manager="kubectl-create")
    cfg = mission(tmp_path, parallelism=4)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert [records[(A, n)].outcome for n in (1, 2, 3)] == ["foreign"] * 3 and (A, 4) not in records
    assert result.results[A].status == "not_run" and A not in result.condemned
    assert job_name("m1", A, 3) in result.results[A].reason and "did not make" in result.results[A].reason
    assert len(api.store.list("jobs", NS, "catchup.stellar.org/range-key=" + A)) == 3  # the forger's, left alone


@pytest.mark.timeout(60)
def test_issue45_failure1_an_operator_is_never_shown_a_foreign_job_s_log_as_the_attempt_s(cluster, tmp_path):
    """`catchup-assets logs` of an attempt whose name a foreign Job holds: refused naming it, never its pod's log."""
    api, kubelet = cluster
    kubelet.script = with_forger
    foreign = job_name("m1", A, 1)
    BatchV1Api(api.api_client).create_namespaced_job(NS, forged_job(foreign, A, 1), field_manager="kubectl-create")
    kubelet.advance(2, tick=1)
    assert api.store.list("pods", NS, f"job-name={foreign}"), "the forger's pod runs"
    with pytest.raises(
        LogUnavailable, match=rf"Job {NS}/{foreign} \(created by kubectl-create\) is not this mission's"
    ):
        backend(api, kubelet, tmp_path).read_log(A, 1)
    assert not [r for r in api.requests.recent if r[3] == "pods/log"]

"""Issue 45 item 1 on the real control plane: a Job the mission did not make is never adopted.

Pins the issue's failure 1 against the real kube-apiserver (its 409, its managedFields naming who
created the Job) and the real Job controller running the forger's pod: a Job under the next attempt's
name, with the dispatcher's labels, another image and a forged exit report, made before the first
pass. As on kubesim (tests/backends/test_k8s_foreign_objects.py).
"""

import json
from dataclasses import replace

import pytest
from kubernetes.client import BatchV1Api

from catchup_assets.backends.kubernetes.names import job_name
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.foreign import FORGED_TX, forged_job, with_forger
from kit.k8s_backend import SETTINGS, A, mission
from kit.real_plane import ScaledClock, real_backend, runner_access, settles, virtual_nodes
from kit.real_plane import held as held_objects

pytestmark = pytest.mark.k8s
NS = "catchup-foreign"


@pytest.mark.timeout(600)
def test_issue45_failure1_a_foreign_job_under_the_next_attempt_s_name_is_never_adopted_on_the_real_plane(
    control_plane, tmp_path
):
    control_plane.create_namespace(NS, exist_ok=True)
    settings = replace(SETTINGS, namespace=NS, storage_mode="ephemeral")
    foreign = job_name("m1", A, 1)
    clock = ScaledClock()
    with virtual_nodes(control_plane, clock, scripts=with_forger) as remote, control_plane.api_client() as api:
        BatchV1Api(api).create_namespaced_job(NS, forged_job(foreign, A, 1), field_manager="kubectl-create")
        access = runner_access(control_plane, remote, tmp_path, NS)
        backend = real_backend(api, settings, access, tmp_path, clock)
        span = MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320)  # range A alone
        cfg = mission(tmp_path, span=span)
        result = run_mission(prepare(cfg), backend, clock=clock)
        assert remote.errors == 0
        # Left alone: the real API server still holds the forger's Job, which it says kubectl-create made.
        jobs = json.loads(BatchV1Api(api).list_namespaced_job(NS, _preload_content=False).data)["items"]
        held = {j["metadata"]["name"]: j for j in jobs}
        assert list(held) == [foreign]
        assert "kubectl-create" in {f["manager"] for f in held[foreign]["metadata"]["managedFields"]}
        # The test made the forger, so the test removes it, pods too, while its nodes' kubelet is here to end
        # them: the next test's virtual nodes take the same names, and a pod left bound to one would be theirs.
        BatchV1Api(api).delete_namespaced_job(foreign, NS, propagation_policy="Foreground")
        assert settles(lambda: held_objects(api, NS, "m1"), {"jobs": 0, "pods": 0, "pvcs": 0}) == {
            "jobs": 0,
            "pods": 0,
            "pvcs": 0,
        }

    records, done = RecordStore(Store(cfg.storage_root), "m1").load()
    first = records[(A, 1)]
    assert (A, 1) in done and first.outcome == "foreign" and "kubectl-create" in first.reason
    # The range ran under attempts 2 and 3 as it would have under 1 and 2: OOM at the unprofiled rung, then ok.
    assert [records[(A, n)].outcome for n in (2, 3)] == ["oom", "ok"] and result.results[A].status == "done"
    rows = build_profile(cfg.storage_root, "m1").profile.to_pylist()
    assert len(rows) == 1 and rows[0]["range_key"] == A
    assert rows[0]["tx_apply_count"] != FORGED_TX and rows[0]["seconds"] != 5.0
    assert all(r.tx_apply_count != FORGED_TX for r in records.values())

"""What a Job and its pod say, as the API server reports them, classified (L4, L23)."""

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k

from catchup_assets.backends.kubernetes.observe import attempt_state, parse_quantity_bytes, waiting
from catchup_assets.core.classify.outcomes import classify

START = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
KEY = "0000016001-0000032000"
LABELS = {"catchup.stellar.org/range-key": KEY, "catchup.stellar.org/attempt": "2", "catchup.stellar.org/tier": "giant"}


def job(*conditions):
    conds = [k.V1JobCondition(type=t, status="True", reason=r, message=msg) for t, r, msg in conditions]
    return k.V1Job(
        metadata=k.V1ObjectMeta(name="catchup-m1-x-a002", labels=LABELS),
        spec=k.V1JobSpec(
            template=k.V1PodTemplateSpec(
                spec=k.V1PodSpec(
                    containers=[
                        k.V1Container(name="catchup", resources=k.V1ResourceRequirements(limits={"memory": "6Gi"}))
                    ]
                )
            )
        ),
        status=k.V1JobStatus(conditions=conds or None),
    )


def pod(phase, *, terminated=None, running=False, reason=None, message=None, conditions=(), waiting_reason=None):
    state = k.V1ContainerState(
        terminated=k.V1ContainerStateTerminated(
            exit_code=terminated[0], reason=terminated[1], started_at=START, finished_at=START + timedelta(seconds=600)
        )
        if terminated
        else None,
        running=k.V1ContainerStateRunning(started_at=START) if running else None,
        waiting=k.V1ContainerStateWaiting(reason=waiting_reason, message="back-off pulling image")
        if waiting_reason
        else None,
    )
    return k.V1Pod(
        metadata=k.V1ObjectMeta(
            name="catchup-m1-x-a002-abcde", labels={"job-name": "catchup-m1-x-a002"}, creation_timestamp=START
        ),
        spec=k.V1PodSpec(containers=[], node_name="node-1"),
        status=k.V1PodStatus(
            phase=phase,
            reason=reason,
            message=message,
            conditions=[
                k.V1PodCondition(type=c[0], status=c[1], reason=c[2], message=(c[3:] or (None,))[0]) for c in conditions
            ]
            or None,
            container_statuses=[
                k.V1ContainerStatus(name="catchup", state=state, image="i", image_id="", ready=False, restart_count=0)
            ],
        ),
    )


@pytest.mark.parametrize(
    "j, p, outcome",
    [
        (job(("Complete", None, None)), pod("Succeeded", terminated=(0, "Completed")), "ok"),
        (job(), pod("Succeeded", terminated=(0, "Completed")), "ok"),  # pod terminal before the Job says so
        (job(("Failed", "PodFailurePolicy", "")), pod("Failed", terminated=(137, "OOMKilled")), "oom"),
        (
            job(("Failed", "PodFailurePolicy", "")),
            pod("Failed", terminated=(3, "Error"), conditions=[("DisruptionTarget", "True", "TerminationByKubelet")]),
            "disrupted",
        ),
        (
            job(("Failed", "BackoffLimitExceeded", "")),
            pod(
                "Failed",
                reason="Evicted",
                message="Pod ephemeral local storage usage exceeds the total limit of containers 40Gi.",
            ),
            "evicted",
        ),
        # L4: the deadline outranks the SIGTERMed pod's own verdict
        (job(("Failed", "DeadlineExceeded", "")), pod("Failed", terminated=(3, "Error")), "deadline"),
        (job(), pod("Failed", reason="DeadlineExceeded", terminated=(143, "Error")), "deadline"),
        # the pod went with its node: the failure policy's message is all that is left
        (
            job(
                (
                    "Failed",
                    "PodFailurePolicy",
                    "Pod default/p has condition DisruptionTarget matching FailJob rule at index 0",
                )
            ),
            None,
            "disrupted",
        ),
        (
            job(
                (
                    "Failed",
                    "PodFailurePolicy",
                    "Container catchup for pod default/p failed with exit code 1 matching FailJob rule at index 1",
                )
            ),
            None,
            "failed",
        ),
        (
            job(
                (
                    "Failed",
                    "PodFailurePolicy",
                    "Container catchup for pod default/p failed with exit code 3 matching FailJob rule at index 1",
                )
            ),
            None,
            "interrupted",
        ),
        (job(("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")), None, "unknown"),
        (job(("Failed", "PodFailurePolicy", "")), pod("Failed", terminated=(1, "Error")), "failed"),
    ],
)
def test_L4_finished_attempts_are_classified_from_what_the_api_reports(j, p, outcome):
    state = attempt_state(j, p)
    assert state.phase == "finished"
    assert classify(state.observation).value == outcome
    assert (state.range_key, state.attempt, state.tier) == (KEY, 2, "giant")
    assert state.memory_limit_bytes == 6 * 1024**3


# How the kubelet leaves an evicted pod (kubernetes pkg/kubelet/eviction/eviction_manager.go,
# evictPod): phase Failed, reason "Evicted", its message; a node-pressure eviction also gets
# DisruptionTarget/TerminationByKubelet with the same message, a pod over its own limit does not
# ("Pod disruption conditions", kubernetes.io/docs/concepts/workloads/pods/disruptions/). Messages:
# pkg/kubelet/eviction/helpers.go. Other DisruptionTarget reasons from the same docs page.
POD_LIMIT = "Pod ephemeral local storage usage exceeds the total limit of containers 40Gi. "
CONTAINER_LIMIT = 'Container catchup exceeded its local ephemeral storage limit "40Gi". '
EMPTYDIR = 'Usage of EmptyDir volume "data" exceeds the limit "100Gi". '
NODE_DISK = (
    "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi. "
    "Container catchup was using 91Gi, request is 0, has larger consumption of ephemeral-storage. "
)
NODE_DISK_OTHERS = "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi. "
NODE_MEMORY = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 91Mi. "
    "Container catchup was using 2Gi, request is 1Gi, has larger consumption of memory. "
)
KUBELET = ("DisruptionTarget", "True", "TerminationByKubelet")


def evicted(message, *conds):
    return pod(
        "Failed",
        reason="Evicted",
        message=message,
        terminated=(137, "Error"),
        conditions=[c + (message,) for c in conds],
    )


@pytest.mark.parametrize(
    "p, outcome",
    [
        # the pod's own disk: evicted, with or without the condition
        (evicted(POD_LIMIT), "evicted"),
        (evicted(POD_LIMIT, KUBELET), "evicted"),
        (evicted(CONTAINER_LIMIT), "evicted"),
        (evicted(EMPTYDIR, KUBELET), "evicted"),
        # a node short of disk, our container the one over its request: the range needs more disk
        (evicted(NODE_DISK, KUBELET), "evicted"),
        # the node's fault: environmental, a disruption
        (evicted(NODE_DISK_OTHERS, KUBELET), "disrupted"),
        (evicted(NODE_MEMORY, KUBELET), "disrupted"),
        (evicted(NODE_MEMORY), "disrupted"),  # a kubelet before 1.26 adds no condition
        (
            pod(
                "Failed",
                terminated=(3, "Error"),
                conditions=[("DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting")],
            ),
            "disrupted",
        ),
        (
            pod(
                "Failed",
                reason="Terminated",
                message="Pod was terminated in response to imminent node shutdown.",
                terminated=(3, "Error"),
                conditions=[KUBELET],
            ),
            "disrupted",
        ),
        (
            pod(
                "Failed",
                terminated=(143, "Error"),
                conditions=[
                    (
                        "DisruptionTarget",
                        "True",
                        "PreemptionByScheduler",
                        "default-scheduler: preempting to accommodate a higher priority pod",
                    )
                ],
            ),
            "disrupted",
        ),
    ],
)
def test_L4_evictions_by_whose_fault_not_by_the_condition(p, outcome):
    state = attempt_state(job(("Failed", "PodFailurePolicy", "")), p)
    assert classify(state.observation).value == outcome


def test_L4_the_disruption_s_reason_and_message_reach_the_evidence():
    p = pod(
        "Failed",
        terminated=(3, "Error"),
        conditions=[("DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting")],
    )
    summary = attempt_state(job(("Failed", "PodFailurePolicy", "")), p).observation.summary()
    assert "EvictionByEvictionAPI" in summary and "Eviction API: evicting" in summary


def test_L23_duration_from_the_pods_own_timestamps_and_none_once_it_is_gone():
    done = attempt_state(job(("Complete", None, None)), pod("Succeeded", terminated=(0, "Completed")))
    assert done.finished_at - done.started_at == 600
    gone = attempt_state(job(("Failed", "BackoffLimitExceeded", "")), None)
    assert gone.started_at is None and gone.finished_at is None


@pytest.mark.parametrize(
    "p, phase",
    [(pod("Running", running=True), "running"), (pod("Pending"), "pending"), (None, "pending")],
)
def test_live_attempts_carry_no_verdict(p, phase):
    state = attempt_state(job(), p)
    assert state.phase == phase and state.observation is None and state.live


@pytest.mark.parametrize(
    "p, reason, config_error",
    [
        (pod("Pending", waiting_reason="ImagePullBackOff"), "ImagePullBackOff", True),
        (pod("Pending", waiting_reason="CreateContainerConfigError"), "CreateContainerConfigError", True),
        (pod("Pending", waiting_reason="ContainerCreating"), "ContainerCreating", False),
        (pod("Pending", conditions=[("PodScheduled", "False", "Unschedulable")]), "Unschedulable", False),
    ],
)
def test_why_a_pending_pod_does_not_start(p, reason, config_error):
    w = waiting(p)
    assert (w.reason, w.config_error) == (reason, config_error)


@pytest.mark.parametrize(
    "q, n", [("6Gi", 6 * 1024**3), ("512Mi", 512 * 1024**2), ("1073741824", 1 << 30), ("1G", 10**9)]
)
def test_memory_quantities(q, n):
    assert parse_quantity_bytes(q) == n

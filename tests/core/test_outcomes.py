import pytest

from catchup_assets.core.classify.outcomes import Observation, Outcome, PastAttempt, RetryPolicy, classify, decide
from catchup_assets.core.size.sizing import MemoryLadder
from catchup_assets.core.units import GiB

F = frozenset


@pytest.mark.parametrize(
    "obs, outcome",
    [
        (Observation(exit_code=0, termination_reason="Completed"), Outcome.OK),
        (Observation(exit_code=137, termination_reason="OOMKilled"), Outcome.OOM),
        (Observation(exit_code=3, conditions=F({"DisruptionTarget"})), Outcome.DISRUPTED),
        (Observation(node_gone=True), Outcome.DISRUPTED),
        (
            Observation(pod_reason="Evicted", message="Pod ephemeral local storage usage exceeds the total limit"),
            Outcome.EVICTED,
        ),
        # kubelet eviction messages (kubernetes pkg/kubelet/eviction/helpers.go): whose fault decides,
        # not the DisruptionTarget condition the kubelet adds to every node-pressure eviction
        (
            Observation(
                exit_code=137,
                pod_reason="Evicted",
                conditions=F({"DisruptionTarget", "TerminationByKubelet"}),
                message="Pod ephemeral local storage usage exceeds the total limit of containers 40Gi. ",
            ),
            Outcome.EVICTED,
        ),
        (
            Observation(
                pod_reason="Evicted",
                conditions=F({"DisruptionTarget", "TerminationByKubelet"}),
                message="The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 1Gi. "
                "Container catchup was using 95Gi, request is 0, has larger consumption of ephemeral-storage. ",
            ),
            Outcome.EVICTED,
        ),
        (
            Observation(
                pod_reason="Evicted",
                conditions=F({"DisruptionTarget", "TerminationByKubelet"}),
                message="The node was low on resource: memory. ",
            ),
            Outcome.DISRUPTED,
        ),
        (Observation(pod_reason="Evicted", message="The node was low on resource: memory. "), Outcome.DISRUPTED),
        (
            Observation(
                pod_reason="Evicted",
                message="The node was low on resource: ephemeral-storage. "
                "Container catchup was using 2Gi, request is 0, has larger consumption of memory. ",
            ),
            Outcome.DISRUPTED,
        ),
        (Observation(pod_reason="Evicted"), Outcome.EVICTED),  # no message to read: as the kubelet says
        # L4: the deadline outranks what the SIGTERMed pod says (exit 3, or even a disruption)
        (Observation(exit_code=3, termination_reason="Error", conditions=F({"DeadlineExceeded"})), Outcome.DEADLINE),
        (Observation(exit_code=143, pod_reason="DeadlineExceeded"), Outcome.DEADLINE),
        (Observation(exit_code=0, conditions=F({"DeadlineExceeded"})), Outcome.DEADLINE),
        (Observation(pod_reason="UnexpectedAdmissionError"), Outcome.REJECTED),
        (Observation(pod_reason="OutOfmemory"), Outcome.REJECTED),
        (Observation(conditions=F({"FailedCreate"})), Outcome.REJECTED),
        (Observation(conditions=F({"BackoffLimitExceeded"})), Outcome.UNKNOWN),
        (Observation(), Outcome.UNKNOWN),
        (Observation(exit_code=3, termination_reason="Error"), Outcome.INTERRUPTED),
        (Observation(exit_code=1, termination_reason="Error"), Outcome.FAILED),
        (Observation(exit_code=2, termination_reason="Error"), Outcome.FAILED),
        (Observation(exit_code=137, termination_reason="Error"), Outcome.FAILED),
        # L37: the operator's stop ended it: what the SIGTERMed worker then says is not the range's
        (Observation(exit_code=3, termination_reason="Error", conditions=F({"StoppedByOperator"})), Outcome.STOPPED),
        (Observation(exit_code=143, conditions=F({"StoppedByOperator"})), Outcome.STOPPED),
        (Observation(node_gone=True, conditions=F({"StoppedByOperator"})), Outcome.STOPPED),  # never started
        # ... but what ended it first keeps its verdict: a success, an OOM, the deadline
        (Observation(exit_code=0, conditions=F({"StoppedByOperator"})), Outcome.OK),
        (Observation(exit_code=137, termination_reason="OOMKilled", conditions=F({"StoppedByOperator"})), Outcome.OOM),
        (Observation(exit_code=3, conditions=F({"StoppedByOperator", "DeadlineExceeded"})), Outcome.DEADLINE),
    ],
)
def test_L4_classify(obs, outcome):
    assert classify(obs) is outcome


def hist(*outcomes, limit=None):
    return [PastAttempt(i + 1, Outcome(o), limit) for i, o in enumerate(outcomes)]


P = RetryPolicy()


@pytest.mark.parametrize(
    "outcomes, action",
    [
        ([], "retry"),
        (["ok"], "done"),
        (["disrupted", "ok"], "done"),
        (["failed"], "condemned"),  # failed: budget 0
        (["interrupted"] * 5, "retry"),
        (["interrupted"] * 3 + ["deadline"] * 3, "condemned"),  # ordinary: 5
        (["oom"] * 4, "retry"),
        (["oom"] * 5, "condemned"),  # 5 rungs
        (["disrupted"] * 20, "retry"),
        (["disrupted"] * 10 + ["evicted"] * 5 + ["rejected"] * 3 + ["unknown"] * 3, "condemned"),
        # L5: spot churn does not drain the OOM budget
        (["disrupted"] * 15 + ["oom"] * 4 + ["interrupted"] * 5, "retry"),
    ],
)
def test_L5_budgets_per_class(outcomes, action):
    assert decide(hist(*outcomes), P).action == action


# An attempt the operator stopped spends no budget: the range is decided as if it never ran (L37).
@pytest.mark.parametrize(
    "outcomes, action, n_oom, spent",
    [
        (["stopped"], "retry", 0, {}),
        (["stopped"] * 50, "retry", 0, {}),  # no stop, however many, condemns
        (["stopped", "ok"], "done", 0, {}),
        (["oom", "stopped"], "retry", 1, {"oom": 1}),  # the ladder keeps its rung, nothing more
        (["failed", "stopped"], "condemned", 0, {"failed": 1}),  # a condemnation stands
        (["interrupted"] * 5 + ["stopped"] * 3, "retry", 0, {"ordinary": 5}),  # 5 is the ordinary budget
        (["interrupted"] * 5 + ["stopped", "interrupted"], "condemned", 0, {"ordinary": 6}),
        (["oom"] * 4 + ["stopped"], "retry", 4, {"oom": 4}),
    ],
)
def test_L37_a_stopped_attempt_is_charged_to_no_budget(outcomes, action, n_oom, spent):
    d = decide(hist(*outcomes), P)
    assert (d.action, d.n_oom) == (action, n_oom)
    assert {g: n for g, n in d.counts.items() if n} == spent


def test_L37_a_stopped_range_says_it_resumes_uncharged():
    d = decide(hist("disrupted", "stopped"), P)
    assert d.reason == "disrupted at attempt 1; attempt 2 stopped, charged to no budget"
    assert decide(hist("stopped"), P).reason == "attempt 1 stopped, charged to no budget"


def test_L9_condemnation_names_the_evidence():
    h = [PastAttempt(1, Outcome.DISRUPTED), PastAttempt(2, Outcome.FAILED, evidence="exit 1; termination Error")]
    d = decide(h, P)
    assert d.action == "condemned"
    assert "failed budget spent (1 > 0)" in d.reason and "exit 1" in d.reason and "a1:disrupted a2:failed" in d.reason


LADDER = MemoryLadder()


@pytest.mark.parametrize(
    "n_oom, expected", [(0, 4 * GiB), (1, 6 * GiB), (2, 9 * GiB), (3, int(13.5 * GiB)), (10, 48 * GiB)]
)
def test_L6_memory_ladder_by_oom_count_with_cap(n_oom, expected):
    assert LADDER.memory_for(4 * GiB, n_oom) == expected


def test_L6_oom_rungs_treble_the_request_before_giving_up():
    assert LADDER.memory_for(GiB, P.oom_rungs - 1) >= 3 * GiB


def test_L6_an_oom_at_the_ladder_s_cap_condemns():
    h = [PastAttempt(1, Outcome.OOM, 48 * GiB)]
    assert decide(h, P, LADDER.cap_bytes).action == "condemned"
    assert decide(h, P, 64 * GiB).action == "retry"


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: MemoryLadder(factor=1.0), "factor"),
        (lambda: RetryPolicy(oom_rungs=0), "oom_rungs"),
        (lambda: RetryPolicy(environmental=-1), "environmental"),
        (lambda: MemoryLadder(cap_bytes=0), "cap_bytes"),
    ],
)
def test_L34_bad_policy_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()

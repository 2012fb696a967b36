"""Classify a finished attempt, spend per-class budgets, climb the memory ladder.

Pure: no dagster, no kubernetes. A backend reduces whatever it saw (pod status,
Job conditions, a local supervisor's verdict) to an `Observation`; everything
after that is decided here, from the range's own attempt history (L5, L6).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from catchup_assets.core.classify.evictions import REASON as EVICTED_REASON
from catchup_assets.core.classify.evictions import node_pressure, own_disk_eviction
from catchup_assets.core.errors import bounded, check_bounds


class Outcome(StrEnum):
    OK = "ok"
    OOM = "oom"
    DISRUPTED = "disrupted"
    EVICTED = "evicted"
    DEADLINE = "deadline"
    REJECTED = "rejected"
    UNKNOWN = "unknown"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    STOPPED = "stopped"  # the operator stopped the run (SIGTERM, SIGINT): charged to no budget
    # The attempt's name was held by an object the mission did not make (issue 45): never run, never
    # read, charged to no budget; its number is spent and the range goes on under the next.
    FOREIGN = "foreign"


class BudgetGroup(StrEnum):
    """Whose fault an outcome was decides which counter it spends (L5, Z2)."""

    ENVIRONMENTAL = "environmental"
    OOM = "oom"
    ORDINARY = "ordinary"
    FAILED = "failed"


GROUP_OF: dict[Outcome, BudgetGroup] = {
    Outcome.DISRUPTED: BudgetGroup.ENVIRONMENTAL,
    Outcome.EVICTED: BudgetGroup.ENVIRONMENTAL,
    Outcome.REJECTED: BudgetGroup.ENVIRONMENTAL,
    Outcome.UNKNOWN: BudgetGroup.ENVIRONMENTAL,
    Outcome.OOM: BudgetGroup.OOM,
    Outcome.INTERRUPTED: BudgetGroup.ORDINARY,
    Outcome.DEADLINE: BudgetGroup.ORDINARY,
    Outcome.FAILED: BudgetGroup.FAILED,
}

# Outcomes that spend no budget: the range is retried as if the attempt never counted.
UNCHARGED = frozenset({Outcome.STOPPED, Outcome.FOREIGN})

# stellar-core exits 3 after draining on SIGTERM, and also on a corrupt archive.
EXIT_INTERRUPTED = 3

# Pod/Job condition and reason strings as the Kubernetes API spells them.
OOM_REASONS = frozenset({"OOMKilled"})
DISRUPTION_CONDITIONS = frozenset({"DisruptionTarget"})
DEADLINE_REASONS = frozenset({"DeadlineExceeded"})
# The condition a backend sets on an attempt it ended because the operator stopped the run.
STOP_CONDITION = "StoppedByOperator"
ADMISSION_REASONS = frozenset(
    {
        "UnexpectedAdmissionError",
        "OutOfcpu",
        "OutOfmemory",
        "OutOfpods",
        "OutOfephemeral-storage",
        "NodeAffinity",
        "NodeSelectorMismatching",
        "Rejected",
        "FailedCreate",
        "Unschedulable",
    }
)


@dataclass(frozen=True)
class Observation:
    """What a backend saw of one finished attempt, before any judgement.

    `conditions` holds condition types/reasons from the pod and its Job
    (`DisruptionTarget`, `DeadlineExceeded`, `BackoffLimitExceeded`, ...);
    `pod_reason` the pod's status reason (`Evicted`, `DeadlineExceeded`,
    an admission reason); `termination_reason` the container's
    (`OOMKilled`, `Error`, `Completed`).
    """

    exit_code: int | None = None
    termination_reason: str | None = None
    pod_reason: str | None = None
    conditions: frozenset[str] = frozenset()
    message: str = ""
    node_gone: bool = False

    def summary(self) -> str:
        parts = []
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        for label, value in (
            ("termination", self.termination_reason),
            ("pod", self.pod_reason),
        ):
            if value:
                parts.append(f"{label} {value}")
        if self.conditions:
            parts.append("conditions " + ",".join(sorted(self.conditions)))
        if self.node_gone:
            parts.append("node gone")
        if self.message:
            parts.append(self.message[:200])
        return "; ".join(parts) or "no evidence"


def classify(obs: Observation) -> Outcome:
    """Map an observation to one class of L4. Order matters and is the point."""
    # The deadline kills with SIGTERM, so the pod itself says exit 3 or 143:
    # the deadline verdict must outrank it, whichever was seen first (L4).
    if (
        obs.pod_reason in DEADLINE_REASONS
        or obs.termination_reason in DEADLINE_REASONS
        or obs.conditions & DEADLINE_REASONS
    ):
        return Outcome.DEADLINE
    if obs.exit_code == 0:
        return Outcome.OK
    if obs.termination_reason in OOM_REASONS:
        return Outcome.OOM
    # An operator's stop ended it: whatever the worker then said (exit 3, 143) is not the range's.
    if STOP_CONDITION in obs.conditions:
        return Outcome.STOPPED
    # Before the disruption check: the kubelet marks a node-pressure eviction
    # `DisruptionTarget` even when our pod filled the node's disk (evictions.py).
    if own_disk_eviction(obs.pod_reason, obs.message):
        return Outcome.EVICTED
    if obs.conditions & DISRUPTION_CONDITIONS or obs.node_gone:
        return Outcome.DISRUPTED
    if node_pressure(obs.pod_reason, obs.message):
        return Outcome.DISRUPTED  # the node ran short, with or without the condition (pre-1.26)
    if obs.pod_reason == EVICTED_REASON:
        return Outcome.EVICTED
    if obs.pod_reason in ADMISSION_REASONS or obs.conditions & ADMISSION_REASONS:
        return Outcome.REJECTED
    if obs.exit_code is None:
        return Outcome.UNKNOWN
    if obs.exit_code == EXIT_INTERRUPTED:
        return Outcome.INTERRUPTED
    return Outcome.FAILED


@dataclass(frozen=True)
class RetryPolicy:
    """Per-class retry budgets (defaults: L5); the memory ladder is sizing's (L6).

    A budget is how many outcomes of that group a range may have and still be
    retried; `oom_rungs` counts the rungs tried, so 5 rungs run at
    base * 1.5**0 .. base * 1.5**4 and the fifth OOM condemns.
    """

    # Upper bounds (issue 45 item 5): past them a budget is a typo, not a policy. Spot reclaims
    # are many over a long mission; a 50th OOM rung is 1.5**49 times the base, far past any cap.
    environmental: int = bounded(20, ge=0, le=1000)
    oom_rungs: int = bounded(5, ge=1, le=50)
    ordinary: int = bounded(5, ge=0, le=100)
    failed: int = bounded(0, ge=0, le=100)

    def __post_init__(self) -> None:
        check_bounds(self, "retry budget")

    def allowed(self, group: BudgetGroup) -> int:
        """Outcomes of `group` a range may have and still be retried."""
        return {
            BudgetGroup.ENVIRONMENTAL: self.environmental,
            BudgetGroup.OOM: self.oom_rungs - 1,
            BudgetGroup.ORDINARY: self.ordinary,
            BudgetGroup.FAILED: self.failed,
        }[group]


@dataclass(frozen=True)
class PastAttempt:
    """The part of an attempt record that retry decisions read."""

    attempt: int
    outcome: Outcome
    memory_limit_bytes: int | None = None
    evidence: str = ""


class Action(StrEnum):
    DONE = "done"
    RETRY = "retry"
    CONDEMNED = "condemned"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str = ""
    n_oom: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.action is not Action.RETRY


def decide(history: Sequence[PastAttempt], policy: RetryPolicy, memory_cap_bytes: int | None = None) -> Decision:
    """Done, retry, or condemned, from the range's own finished attempts.

    `memory_cap_bytes` is the memory ladder's top: an OOM there condemns, since a
    retry would run at the very limit that OOMed. An attempt the operator stopped
    (`UNCHARGED`) is decided as if it never counted: the range resumes.
    """
    everything = sorted(history, key=lambda a: a.attempt)
    ordered = [a for a in everything if a.outcome not in UNCHARGED]
    counts = Counter(GROUP_OF[a.outcome] for a in ordered if a.outcome is not Outcome.OK)
    n_oom = counts[BudgetGroup.OOM]
    by_name = {g.value: counts[g] for g in BudgetGroup}
    stopped = (
        f"; attempt {everything[-1].attempt} {everything[-1].outcome.value}, charged to no budget"
        if (everything and everything[-1].outcome in UNCHARGED)
        else ""
    )
    if not ordered:
        return Decision(Action.RETRY, stopped.removeprefix("; ") or "never attempted", 0, by_name)
    last = ordered[-1]
    if last.outcome is Outcome.OK:
        return Decision(Action.DONE, f"ok at attempt {last.attempt}", n_oom, by_name)
    group = GROUP_OF[last.outcome]
    chain = " ".join(f"a{a.attempt}:{a.outcome.value}" for a in ordered)
    if counts[group] > policy.allowed(group):
        reason = (
            f"{group.value} budget spent ({counts[group]} > {policy.allowed(group)}): "
            f"last attempt {last.attempt} {last.outcome.value}"
            + (f" ({last.evidence})" if last.evidence else "")
            + f"; chain {chain}"
        )
        return Decision(Action.CONDEMNED, reason, n_oom, by_name)
    if (
        last.outcome is Outcome.OOM
        and memory_cap_bytes is not None
        and last.memory_limit_bytes is not None
        and last.memory_limit_bytes >= memory_cap_bytes
    ):
        # Retrying at the cap would OOM at the identical limit again.
        reason = f"OOM at the memory cap ({last.memory_limit_bytes} bytes); chain {chain}"
        return Decision(Action.CONDEMNED, reason, n_oom, by_name)
    return Decision(Action.RETRY, f"{last.outcome.value} at attempt {last.attempt}{stopped}", n_oom, by_name)

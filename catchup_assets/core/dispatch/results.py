"""What a dispatcher reports: each range's result, a pass's status line, the mission's result."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from catchup_assets.core.errors import CatchupError
from catchup_assets.core.forecast.time_to_go import TimeToGo


class DispatcherStuck(CatchupError, RuntimeError):
    """The same failure on consecutive passes: an operator must look (its cause is chained)."""


class RangeStatus(StrEnum):
    DONE = "done"
    CONDEMNED = "condemned"
    NOT_RUN = "not_run"  # a stopped or blocked run left it for later


@dataclass(frozen=True)
class RangeResult:
    range_key: str
    status: RangeStatus
    reason: str
    row: dict | None  # the profile row of the range (chain-aggregated measurements)
    attempts: int
    outcomes: str
    tier: str | None
    memory_limit_bytes: int | None
    log_path: str | None


@dataclass(frozen=True)
class Status:
    passes: int
    completed: int
    in_flight: int
    queued: int
    condemned: int
    total: int
    other_live: int  # live attempts of this mission owned by another dispatcher
    stragglers: tuple[str, ...] = ()
    stalled_seconds: float = 0.0
    control: str = ""  # an operator's control in force (paused, draining, live parallelism); "": none
    # Of in_flight, the ranges whose attempt waits for a node or its worker's start (submitted, a pod
    # unschedulable): a mission whose pods cannot schedule must not look busy.
    pending: int = 0
    to_go: TimeToGo | None = None  # the time to go with its p10-p90 band (progress.py); None: not estimated

    @property
    def running(self) -> int:
        """Ranges in flight past pending: their attempt runs, or its final read is owed (L31)."""
        return self.in_flight - self.pending

    def line(self) -> str:
        s = (
            f"completed {self.completed}/{self.total}, in flight {self.in_flight} "
            f"(pending {self.pending}, running {self.running}), queued {self.queued}, condemned {self.condemned}"
        )
        if self.other_live:
            s += f", other dispatchers' live {self.other_live}"
        if self.control:
            s += f"; {self.control}"
        if self.to_go is not None:
            s += f"; {self.to_go.line()}"
        if self.stragglers:
            s += "; stragglers: " + ", ".join(self.stragglers)
        return s


@dataclass
class MissionResult:
    results: dict[str, RangeResult]
    passes: int
    drained: bool = False  # an operator drained the run: its NOT_RUN ranges are left for a later run
    stopped: str | None = None  # why an operator's stop ended the run (stopping.py), else None

    @property
    def condemned(self) -> dict[str, str]:
        return {k: r.reason for k, r in self.results.items() if r.status is RangeStatus.CONDEMNED}

    @property
    def done(self) -> list[str]:
        return [k for k, r in self.results.items() if r.status is RangeStatus.DONE]


def how_ended(result: MissionResult) -> str:
    """How the run ended, one of mission_phase.RUN_ENDINGS: an operator's stop, condemned ranges, all done, a drain,
    else blocked (a circuit breaker, a budget)."""
    if result.stopped:
        return "stopped"
    if result.condemned:
        return "condemned"
    if len(result.done) == len(result.results):
        return "completed"
    return "drained" if result.drained else "blocked"


def with_the_rest(
    results: Mapping[str, RangeResult], keys: Iterable[str], attempts: Mapping[str, int], why: str
) -> dict[str, RangeResult]:
    """Every range given to the run: those it decided, and the rest NOT_RUN for `why`, with their attempt counts."""
    out = dict(results)
    for key in keys:
        if key not in out:
            out[key] = RangeResult(key, RangeStatus.NOT_RUN, why, None, attempts.get(key, 0), "", None, None, None)
    return out

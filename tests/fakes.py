"""Fakes at the real boundaries: a clock, and a backend that runs attempts in fake time.

The fake backend is a tiny "cluster": attempts exist from submit until release,
finish when the fake clock passes their scripted duration, and answer a
duplicate create the way the API server does (AlreadyExists, the 409).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import Observation
from catchup_assets.core.dispatch.ports import (
    AlreadyExists,
    AttemptSpec,
    AttemptState,
    Collected,
    Peaks,
    TransientBackendError,
)

OK = Observation(exit_code=0, termination_reason="Completed")
OOM = Observation(exit_code=137, termination_reason="OOMKilled")
DISRUPTED = Observation(exit_code=3, conditions=frozenset({"DisruptionTarget"}))
FAILED = Observation(exit_code=1, termination_reason="Error")
INTERRUPTED = Observation(exit_code=3, termination_reason="Error")


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0):
        self.now = start

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Script:
    """What one attempt will do: run `seconds`, then end as `observation`."""

    seconds: float = 10.0
    observation: Observation = OK
    peaks: Peaks = Peaks(100, 200, 300)
    fresh_start: bool = True
    resumed_from: int | None = None
    tx: tuple[int, float] = (1000, 2.0)
    lost_after: float | None = None  # its node goes then: running on a lost node until `seconds`, no finish time


@dataclass
class FakeAttempt:
    spec: AttemptSpec
    script: Script
    started: float


@dataclass
class FakeBackend:
    clock: FakeClock
    script: Callable[[AttemptSpec], Script] = lambda spec: Script()
    attempts: dict[str, FakeAttempt] = field(default_factory=dict)
    submitted: list[AttemptSpec] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    released_ranges: list[str] = field(default_factory=list)
    max_live: int = 0
    collect_errors: int = 0  # the next N collects raise
    # call name -> how many of its next calls answer as an API server that could not
    # (TransientBackendError, what the real backends raise for 429/5xx/resets)
    faults: dict[str, int] = field(default_factory=dict)
    faults_raised: int = 0

    def _fault(self, call: str) -> None:
        if self.faults.get(call, 0) > 0:
            self.faults[call] -= 1
            self.faults_raised += 1
            raise TransientBackendError(f"{call}: HTTP 503")

    def submit(self, spec: AttemptSpec) -> None:
        self._fault("submit")
        if spec.attempt_id in self.attempts:
            raise AlreadyExists(spec.attempt_id)
        self.attempts[spec.attempt_id] = FakeAttempt(spec, self.script(spec), self.clock.time())
        self.submitted.append(spec)
        self.max_live = max(self.max_live, sum(1 for s in self.observe() if s.live))

    def _state(self, a: FakeAttempt) -> AttemptState:
        end, lost = a.started + a.script.seconds, a.script.lost_after
        done = self.clock.time() >= end
        return AttemptState(
            a.spec.range_key,
            a.spec.attempt,
            "finished" if done else "running",
            observation=a.script.observation if done else None,
            started_at=a.started,
            finished_at=end if done and lost is None else None,
            node_lost=lost is not None and self.clock.time() >= a.started + lost,
            node="node-1",
            peaks=a.script.peaks if done else Peaks(a.script.peaks.anon_bytes),
            memory_limit_bytes=a.spec.memory_limit_bytes,
            tier=a.spec.tier,
        )

    def observe(self) -> list[AttemptState]:
        self._fault("observe")
        return [self._state(a) for a in self.attempts.values()]

    def collect(self, state: AttemptState, log_url: Callable[[int], str]) -> Collected:
        self._fault("collect")
        if self.collect_errors:
            self.collect_errors -= 1
            raise OSError("log endpoint unavailable")
        s = self.attempts[state.attempt_id].script
        return Collected(
            peaks=s.peaks,
            log_path=log_url(state.attempt),
            tx_apply_count=s.tx[0],
            tx_apply_seconds=s.tx[1],
            resumed_from_ledger=s.resumed_from,
            fresh_start=s.fresh_start,
        )

    def release(self, state: AttemptState) -> None:
        assert not state.live, "released a live attempt"
        self._fault("release")
        self.attempts.pop(state.attempt_id, None)
        self.released.append(state.attempt_id)

    def release_range(self, range_key: str) -> None:
        self._fault("release_range")
        self.released_ranges.append(range_key)

    def shutdown(self, grace: float) -> list[str]:
        return [s.attempt_id for s in self.observe() if s.live]

    def live_keys(self) -> list[str]:
        return [s.range_key for s in self.observe() if s.live]

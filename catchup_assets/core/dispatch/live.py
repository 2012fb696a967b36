"""Each attempt's start as the dispatcher sees it: once when it is submitted, once when it runs.

So a range's partition shows its attempt chain while it runs, not only when it ends (issue 23):
the caller (the Dagster asset) turns each event into an observation. At most two an attempt,
never one a pass: at 4000 ranges an event a pass would be millions of event-log rows, two an
attempt are ~10,000 (benchmarks/README.md, "Attempt observations").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from catchup_assets.core.dispatch.ports import AttemptSpec, AttemptState, Phase


@dataclass(frozen=True)
class AttemptEvent:
    """An attempt that started: submitted (PENDING, no node yet) or now running on its node."""

    range_key: str
    attempt: int
    phase: Phase
    tier: str | None = None
    memory_limit_bytes: int | None = None
    memory_request_bytes: int | None = None  # known at submit only: the backends report the limit
    capacity_type: str = ""
    node: str | None = None
    started_at: float | None = None  # epoch seconds, the attempt's own clock (L23)


class AttemptEvents:
    """What the Dispatcher tells `on_attempt`, a part of `reconciler.Dispatcher`'s state."""

    def __init__(self, on_attempt: Callable[[AttemptEvent], None] | None = None) -> None:
        self.on_attempt = on_attempt or (lambda event: None)
        # Attempts whose running this dispatcher told. Memory, not records: a restarted dispatcher
        # tells once more the running of what it adopts, which costs one row, never a decision (L10).
        self._told: set[tuple[str, int]] = set()

    def submitted(self, spec: AttemptSpec) -> None:
        self.on_attempt(
            AttemptEvent(
                spec.range_key,
                spec.attempt,
                Phase.PENDING,
                spec.tier,
                spec.memory_limit_bytes,
                spec.memory_request_bytes,
                spec.capacity_type,
            )
        )

    def seen(self, st: AttemptState) -> None:
        """A live attempt this pass; told the first time it is seen running, with its node."""
        key = (st.range_key, st.attempt)
        if st.phase is not Phase.RUNNING or key in self._told:
            return
        self._told.add(key)
        self.on_attempt(
            AttemptEvent(
                st.range_key,
                st.attempt,
                Phase.RUNNING,
                st.tier,
                st.memory_limit_bytes,
                node=st.node,
                started_at=st.started_at,
            )
        )

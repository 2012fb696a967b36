"""The circuit breaker: a systemic failure pauses the mission once, budgets unspent.

A broken core config or an archive outage fails every range the same way. Charged
one by one, each range would be condemned after its own budget, hours apart. So
failures that repeat one signature are held, undecided; `attempts` of them in a row
trip the breaker (new dispatches stop, with that one cause), and those ranges keep
their budgets. A success or an OOM (the environment works), or a different failure,
releases the held ranges to be judged as usual. Pure: the dispatcher acts on its verdicts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import Outcome

_VARIABLE = re.compile(r"\d+|[0-9a-f]{5}\b")  # numbers, range keys, pod-name suffixes
LAST_ERROR = "; last error: "  # how an attempt's reason carries stellar-core's last error line


def failure_signature(outcome: str | None, exit_code: int | None, reason: str | None) -> str:
    """What makes two failures the same: outcome, exit code, and stellar-core's last error
    line (else the observation) with every number and pod-name suffix blanked out."""
    reason = reason or ""
    text = reason.split(LAST_ERROR, 1)[1] if LAST_ERROR in reason else reason
    return f"{outcome} exit {exit_code}: {_VARIABLE.sub('#', text)[:200]}"


@dataclass(frozen=True)
class Verdict:
    hold: bool = False  # the finished attempt's range stays undecided
    release: tuple[str, ...] = ()  # held ranges to judge now, as usual
    spare: tuple[tuple[str, int], ...] = ()  # attempts not to charge: a later run grants their budgets
    trip: str | None = None  # the cause, when the breaker trips now


@dataclass
class Breaker:
    attempts: int  # identical failures in a row that trip it; 0: off
    streak: list[tuple[str, int]] = field(default_factory=list)
    signature: str | None = None
    held: set[str] = field(default_factory=set)
    tripped: bool = False

    def finished(self, key: str, attempt: int, outcome: Outcome, signature: str) -> Verdict:
        """A finished attempt: hold its range, release the held ones, or trip."""
        if not self.attempts:
            return Verdict()
        if outcome is not Outcome.FAILED:
            return Verdict(release=self._release() if outcome in (Outcome.OK, Outcome.OOM) else ())
        release: tuple[str, ...] = ()
        if self.streak and signature != self.signature:
            if self.tripped:
                return Verdict()  # another failure after the pause: its range's own, judged as usual
            release = self._release()
        self.signature = signature
        self.streak.append((key, attempt))
        self.held.add(key)
        if self.tripped:
            return Verdict(hold=True, release=release, spare=((key, attempt),))  # in flight when it tripped
        if len(self.streak) < self.attempts:
            return Verdict(hold=True, release=release)
        self.tripped = True
        keys = sorted({k for k, _ in self.streak})
        cause = (
            f"circuit breaker: {len(self.streak)} attempts in a row failed the same way ({self.signature}); "
            f"ranges {', '.join(keys)} keep their budgets; new dispatches stopped"
        )
        return Verdict(hold=True, release=release, spare=tuple(self.streak), trip=cause)

    def release_all(self) -> tuple[str, ...]:
        """Nothing else is left to tell a systemic failure from these ranges' own: judge them."""
        return self._release()

    def _release(self) -> tuple[str, ...]:
        held = tuple(sorted(self.held))
        self.held, self.streak, self.signature = set(), [], None
        return held

"""A running mission's time to go: what is left, over the live slots, with a p10-p90 band (issue 36 item 2).

Pure. What is left is the attempts in flight and the ranges waiting, in dispatch order.
Each range's seconds come from the profile (`predicted`); a range it does not cover
takes the median of those it does, and with no profile at all the median of what this
mission has completed so far. As ranges complete, this mission's own pace corrects the
profile: the predicted seconds are scaled by the ratio of measured to predicted over the
ranges done (a core release or an archive that is slower than the last mission's shows
at once, not at the end). An attempt in flight holds its slot for what is left of its
seconds, and at least `FLOOR` of them: past its prediction it is late, not done.

The expected time is one list schedule of those seconds (the dispatcher's order and
slots); the band draws each range's seconds from exp(N(0, sigma)) around it, as
spread.py does for a plan, and takes the p10 and p90 of the draws' schedules.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError

FLOOR = 0.05  # an attempt past its predicted seconds still holds its slot this share of them
MIN_PACE_SAMPLES = 3  # completed ranges before this mission's pace corrects the profile
DRAWS = 40  # a band per pass: enough for p10-p90, cheap at 4000 ranges (benchmarks/README.md)


@dataclass(frozen=True)
class InFlight:
    predicted_seconds: float | None  # None: the profile does not cover it
    running_seconds: float  # since its attempt started (0: pending, not started yet)


@dataclass(frozen=True)
class Done:
    predicted_seconds: float | None
    measured_seconds: float


@dataclass(frozen=True)
class TimeToGo:
    expected_seconds: float
    p10_seconds: float
    p90_seconds: float
    pace: float  # measured / predicted over this mission's completed ranges (1.0 until MIN_PACE_SAMPLES)
    left: int  # ranges in flight or waiting
    known: bool = True  # False: no profile and no range completed yet, so no seconds to go on

    def line(self) -> str:
        if not self.left:
            return "nothing left"
        if not self.known:
            return "time to go unknown until a range completes (no profile)"
        return (
            f"~{_hours(self.expected_seconds)} to go (p10 {_hours(self.p10_seconds)}, "
            f"p90 {_hours(self.p90_seconds)}; pace x{self.pace:.2f} of the profile)"
        )


def _hours(seconds: float) -> str:
    # Under a minute in seconds: a demo's or a tail's "0 min to go" reads as done.
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _known(seconds: float | None) -> bool:
    """A usable figure: a profile or a record may hold None, 0, a negative or a NaN (a torn row)."""
    return seconds is not None and math.isfinite(seconds) and seconds > 0


def pace(done: Sequence[Done]) -> float:
    """This mission's measured seconds over the profile's, over the completed ranges it covers."""
    pairs = [
        (d.predicted_seconds, d.measured_seconds)
        for d in done
        if _known(d.predicted_seconds) and _known(d.measured_seconds)
    ]
    if len(pairs) < MIN_PACE_SAMPLES:
        return 1.0
    return sum(m for _, m in pairs) / sum(p for p, _ in pairs)


def _fill(predicted: Sequence[float | None], done: Sequence[Done]) -> list[float]:
    """Each range's seconds: its own prediction, else the median of the others', else of those done."""
    known = [p for p in predicted if _known(p)]
    fallback = statistics.median(known) if known else None
    if fallback is None:
        measured = [d.measured_seconds for d in done if _known(d.measured_seconds)]
        fallback = statistics.median(measured) if measured else 0.0
    return [p if _known(p) else fallback for p in predicted]


def _schedule(in_flight: Sequence[float], waiting: Sequence[float], slots: int) -> float:
    """When the last range ends: the attempts in flight run out what they have left, the waiting
    ones start, in order, in the first free slot. More in flight than slots (a lowered cap): the
    first of them to end free nothing, as the dispatcher submits nothing until it is under the cap."""
    ends = sorted(in_flight)
    excess = max(0, len(ends) - slots)
    free = [0.0] * max(0, slots - len(ends)) + ends[excess:]
    heapq.heapify(free)
    end = ends[-1] if ends else 0.0
    for s in waiting:
        t = heapq.heappop(free) + s
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def time_to_go(
    in_flight: Sequence[InFlight],
    waiting: Sequence[float | None],
    done: Sequence[Done],
    slots: int,
    sigma: float = 0.1,
    draws: int = DRAWS,
    seed: int = 0,
) -> TimeToGo:
    """The time until the last range ends; `waiting` in dispatch order, `slots` the live cap."""
    if slots < 1:
        raise ConfigError(f"slots must be >= 1, got {slots}")
    left = len(in_flight) + len(waiting)
    if not left:
        return TimeToGo(0.0, 0.0, 0.0, pace(done), 0)
    k = pace(done)
    seconds = [s * k for s in _fill([f.predicted_seconds for f in in_flight] + list(waiting), done)]
    if not any(seconds):
        return TimeToGo(0.0, 0.0, 0.0, k, left, known=False)
    flight_total, wait = seconds[: len(in_flight)], seconds[len(in_flight) :]
    running = [f.running_seconds if math.isfinite(f.running_seconds) else 0.0 for f in in_flight]

    def remaining(total: float, ran: float) -> float:
        return max(total - ran, FLOOR * total)

    expected = _schedule([remaining(t, r) for t, r in zip(flight_total, running, strict=True)], wait, slots)
    spans = []
    for d in range(draws):
        rng = random.Random(f"time-to-go:{seed}:{d}")
        drawn = [s * math.exp(rng.gauss(0.0, sigma)) for s in seconds]
        flight = [remaining(t, r) for t, r in zip(drawn[: len(in_flight)], running, strict=True)]
        spans.append(_schedule(flight, drawn[len(in_flight) :], slots))
    deciles = statistics.quantiles(spans, n=10, method="inclusive") if draws >= 2 else [expected] * 9
    return TimeToGo(expected, min(deciles[0], expected), max(deciles[-1], expected), k, left)

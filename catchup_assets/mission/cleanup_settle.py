"""Before a cleanup deletes an attempt, its record is made durable (issue 36 item 9).

A dispatcher killed with attempts in flight leaves them to finish on their own, unrecorded:
deleting them then loses their outcome and measurements, and a later run that finds their
ranges already complete on the kept volumes would record a 0.2 s range in their place. So
each attempt the backend holds finished and not done-marked is first finished as a
dispatcher finishes it, by the dispatcher's own `Finisher` over a `RangeBook` of the
mission's records: its final read (peaks, transactions, its log archived), its record, its
done mark, then its release. A forced cleanup first stops the live attempts as a stopping
run does (`stopping.stop_attempts`, L37), so they too are recorded before anything goes.
An attempt whose final read the backend could not answer stays unrecorded, and the plan
keeps it (`mission/cleanup.py`): a later cleanup reads it again.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, replace

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig, SystemClock
from catchup_assets.core.dispatch.finish import Finisher
from catchup_assets.core.dispatch.ports import MAX_BYTES, AttemptState, Backend
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.stopping import stop_attempts
from catchup_assets.mission.cleanup import CleanupPlan, plan_cleanup
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

log = logging.getLogger(__name__)
_DEFAULTS = DispatchConfig.__dataclass_fields__
STOP_GRACE_SECONDS = 30.0  # a forced cleanup's shutdown of live attempts, as a stopped run's (L37)
WHY = "stopped by a forced cleanup"


@dataclass(frozen=True)
class Settled:
    """What a cleanup recorded before deleting: each attempt as `KEY aNNN outcome`."""

    recorded: tuple[str, ...] = ()
    unrecorded: tuple[str, ...] = ()  # finished, its final read unanswered: kept
    stopped: int = 0  # attempts a forced cleanup's stop recorded (those it stopped, those ended before)

    def lines(self) -> list[str]:
        out = []
        if self.recorded:
            shown = ", ".join(self.recorded[:5]) + (
                f" and {len(self.recorded) - 5} more" if len(self.recorded) > 5 else ""
            )
            out.append(
                f"  recorded: {len(self.recorded)} finished attempts no dispatcher recorded, then released ({shown})"
            )
        if self.stopped:
            out.append(
                f"  stopped:  the live attempts (forced): {self.stopped} attempts recorded by the stop, then released"
            )
        if self.unrecorded:
            out.append(
                f"  unread:   {len(self.unrecorded)} attempts whose final read the backend did not answer: "
                f"kept ({', '.join(self.unrecorded[:5])}); clean up again later"
            )
        return out


def settle(root: str, mission: str, backend: Backend, *, stop_live: bool = False) -> Settled:
    """Record every finished attempt of the mission the backend holds without a done mark; with
    `stop_live` (a forced cleanup), stop the live ones first and record them too."""
    records = RecordStore(Store(root), mission)
    states = backend.observe()
    keys = sorted({s.range_key for s in states})
    if not keys:
        return Settled()
    # The book is here for its records, done marks and writes; verdicts are the dispatcher's, under the
    # deployment's policies, so it is filled without judging (recover() would judge, and log a condemned
    # range by a default policy that may not be the deployment's).
    book = RangeBook(keys, records, _holder(), RetryPolicy(), MAX_BYTES, lambda result, already: None)
    recs, done = records.load(keys)
    for (key, attempt), rec in recs.items():
        book.recs[key][attempt] = rec
    for key, attempt in done:
        book.done[key].add(attempt)
    finisher = Finisher(
        mission,
        backend,
        records,
        book,
        SystemClock(),
        lambda st, outcome, rec: None,
        _DEFAULTS["peak_flush_seconds"].default,
        _DEFAULTS["collect_tries"].default,
        segment_every=len(states) + 1,  # one segment, appended below
    )
    stopped = 0
    if stop_live and any(s.live for s in states):
        stopped = stop_attempts(mission, WHY, STOP_GRACE_SECONDS, backend, records, set(keys), finisher)
        states = backend.observe()
    recorded, unrecorded = [], []
    for st in sorted(states, key=lambda s: (s.range_key, s.attempt)):
        if st.live or records.is_done(st.range_key, st.attempt):
            continue
        (recorded if finisher.finish_now(st) else unrecorded).append(_said(st, book))
    finisher.append_segment()  # the profile's next read finds them in the snapshot log
    for line in recorded:
        log.warning("mission %s: cleanup recorded %s before deleting it", mission, line)
    return Settled(tuple(recorded), tuple(unrecorded), stopped)


def _said(st: AttemptState, book: RangeBook) -> str:
    rec = book.recs[st.range_key].get(st.attempt)
    outcome = rec.outcome if rec is not None and rec.outcome else "unrecorded"
    return f"{st.range_key} a{st.attempt:03d} {outcome}"


def _holder() -> str:
    return f"cleanup:{socket.gethostname()}:{os.getpid()}"


def settled_plan(
    root: str,
    mission: str,
    backend,
    *,
    everything: bool = False,
    also_live: Iterable[str] = (),
    unchecked: Iterable[str] = (),
    force: bool = False,
    dry_run: bool = False,
    now: float | None = None,
) -> tuple[CleanupPlan, Settled]:
    """The cleanup's plan, made after its unrecorded attempts were recorded (and, forced, its live
    ones stopped and recorded). A dry run records nothing; a refused one neither: a live
    dispatcher records its own attempts."""
    also_live, unchecked = list(also_live), list(unchecked)

    def plan() -> CleanupPlan:
        return plan_cleanup(
            root, mission, backend, everything=everything, also_live=also_live, unchecked=unchecked, now=now
        )

    first = plan()
    if dry_run or not first.unrecorded or (first.refused_without_force and not force):
        return first, Settled()
    settled = settle(root, mission, backend, stop_live=force and any(o.live for o in first.unrecorded))
    # What was forced past stays said, though the stop has ended the live attempts it named.
    then = plan()
    return replace(then, live=tuple(dict.fromkeys(first.live + then.live))), settled

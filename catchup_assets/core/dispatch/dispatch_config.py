"""One dispatcher's work and its clock: what a `Dispatcher` (reconciler.py) is given."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from catchup_assets.core.dispatch.mission_control import ABSOLUTE, Cap
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.values.ledger_range import LedgerRange


class Clock(Protocol):
    def time(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def __init__(self) -> None:
        self.woken = False  # set by a stopping dispatcher (stopping.py): its sleeps end at once

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.woken and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))


@dataclass(frozen=True)
class DispatchConfig:
    """One dispatcher's work: the mission (its policies, declared there once), the ranges
    this run was given in dispatch order, the profile they are sized from, and the
    dispatcher's own watchfulness."""

    mission: MissionConfig
    ranges: Sequence[LedgerRange]  # in dispatch order
    profile: ProfileIndex | None = None
    peak_flush_seconds: float = 60.0  # in-flight peaks made durable at most this often
    collect_tries: int = 3  # final reads of a finished attempt before recording without (L31)
    transient_alert_passes: int = 10  # consecutive passes without an answer from the backend: alert
    # A pass that raises is retried after a poll; the same failure this many passes in a
    # row stops the dispatcher with it as the cause, rather than looping on it for hours.
    failing_passes_limit: int = 5
    # Every this many finished attempts go to the snapshot log as one segment (store/snapshot_log.py):
    # a run that dies leaves fewer than this many records for the next reader to open one by one.
    segment_every: int = 50
    # Who claims attempts: a restart with the same holder (a retried step of one Dagster
    # run) takes its own claims back; None: this dispatcher alone.
    holder: str | None = None
    # A claim this young whose attempt is neither seen nor recorded is another dispatcher's
    # submit in flight: its range waits; older, the claimer died before submitting.
    claim_grace_seconds: float = 120.0
    # Within the grace the other dispatcher may also have run, recorded and released the
    # attempt between two of this one's passes: its range's records are read this often.
    claim_recheck_seconds: float = 10.0
    # An operator's new run over a condemned range grants it fresh budgets; a
    # retry of a dead dispatcher must not, or a mission would loop on it.
    reset_condemned: bool = False
    # An operator's stop (SIGTERM, SIGINT) shuts the attempts in flight down within this (L37).
    stop_grace_seconds: float = 15.0
    # Each range's checkpoint end and its trusted hash, handed to its attempts (issue 24 item 3).
    trusted: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    # The most attempts in flight, whatever the control record says (obey.py): the deployment's
    # max_parallelism the mission's record keeps (mission/saved.py's mission_cap).
    cap: Cap = ABSOLUTE

    def __post_init__(self) -> None:
        keys = [r.key for r in self.ranges]
        if len(set(keys)) != len(keys):
            raise ConfigError("ranges: duplicate range keys in the plan")

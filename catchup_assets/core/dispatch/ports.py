"""The two protocols the dispatcher speaks: to a place that runs attempts, and to its records.

A backend is the source of truth for what is in flight (L10): `observe()` asks
it, every pass, and nothing about liveness is kept anywhere else. Local
subprocesses and Kubernetes Jobs both sit behind these five calls. The records
(`store.records.RecordStore`) are the durable truth of what each attempt did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from catchup_assets.core.classify.outcomes import Observation
from catchup_assets.core.errors import CatchupError
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)
MAX_BYTES = 2**63 - 1  # what a record's int64 column holds


@dataclass(frozen=True)
class AttemptSpec:
    """Everything needed to start one attempt of one range."""

    mission: str
    range_key: str
    attempt: int
    target_ledger: int  # catchup END
    ledger_count: int  # catchup COUNT (range length + overlap)
    memory_request_bytes: int
    memory_limit_bytes: int
    tier: str
    cpu_request: float = 1.0
    profiled: bool = False  # sized from a measurement: a pooled pod then has its node to itself (L15)
    deadline_seconds: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # Ephemeral storage mode: the range's disk, sized from its profile and its evictions (disk.py);
    # None: the deployment's flat request and limit.
    ephemeral_bytes: int | None = None
    # What capacity the attempt buys: its tier's, or on-demand after its range's reclaims
    # (core/size/capacity.py); "": the tier's.
    capacity_type: str = ""

    @property
    def attempt_id(self) -> str:
        return attempt_id(self.range_key, self.attempt)


def attempt_id(range_key: str, attempt: int) -> str:
    return f"{range_key}-a{attempt:03d}"


@dataclass(frozen=True)
class Peaks:
    """High-water marks of one attempt; they only ever merge by max (L20)."""

    anon_bytes: int | None = None
    working_set_bytes: int | None = None
    ephemeral_bytes: int | None = None

    def __post_init__(self) -> None:
        # Peaks enter from a kubelet's JSON or a supervisor's file: a value that is not a
        # byte count (a string, a float, negative, past int64) costs that one sample,
        # with a warning, never the merge, the record or the pass.
        for name in ("anon_bytes", "working_set_bytes", "ephemeral_bytes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES):
                log.warning("peak %s %r is not a byte count: dropped", name, v)
                object.__setattr__(self, name, None)

    def merge(self, other: Peaks) -> Peaks:
        def mx(a: int | None, b: int | None) -> int | None:
            if a is None:
                return b
            if b is None:
                return a
            return max(a, b)

        return Peaks(
            mx(self.anon_bytes, other.anon_bytes),
            mx(self.working_set_bytes, other.working_set_bytes),
            mx(self.ephemeral_bytes, other.ephemeral_bytes),
        )


class Phase(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class AttemptState:
    """One attempt as the backend sees it now."""

    range_key: str
    attempt: int
    phase: Phase
    observation: Observation | None = None  # set when finished
    started_at: float | None = None  # epoch seconds, from the attempt's own clock (L23)
    finished_at: float | None = None
    node: str | None = None
    peaks: Peaks = Peaks()
    memory_limit_bytes: int | None = None
    tier: str | None = None
    # Running as the API says, on a node that is gone: no kubelet runs it any more, and it is
    # not "seen running" (L22) while PodGC takes its time to fail it (40 s at least).
    node_lost: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", Phase(self.phase))  # a plain string is checked and kept as the enum

    @property
    def attempt_id(self) -> str:
        return attempt_id(self.range_key, self.attempt)

    @property
    def live(self) -> bool:
        return self.phase is not Phase.FINISHED


@dataclass(frozen=True)
class Collected:
    """What the final read of a finished attempt yields (L31)."""

    peaks: Peaks = Peaks()
    log_path: str | None = None
    tx_apply_count: int | None = None
    tx_apply_seconds: float | None = None
    resumed_from_ledger: int | None = None
    fresh_start: bool | None = None
    already_complete: bool = False
    last_error: str | None = None  # the worker log's last ERROR/FATAL line
    verification_failed: str | None = None  # its line saying catchup failed verification
    setup_seconds: float | None = None  # start to first replayed checkpoint (measure/phases.py)
    log_notes: tuple[str, ...] = ()  # what the log's exit report left out or which one was taken

    @classmethod
    def from_log(cls, facts, peaks: Peaks, log_path: str | None) -> Collected:
        """What the worker's log said (`logparse.WorkerLogFacts`), with the attempt's peaks."""
        return cls(
            peaks=peaks,
            log_path=log_path,
            tx_apply_count=facts.tx_apply_count,
            tx_apply_seconds=facts.tx_apply_seconds,
            resumed_from_ledger=facts.resumed_from_ledger,
            fresh_start=facts.fresh_start,
            already_complete=bool(facts.already_complete),
            last_error=getattr(facts, "last_error", None),
            verification_failed=getattr(facts, "verification_failed", None),
            setup_seconds=getattr(facts, "setup_seconds", None),
            log_notes=tuple(getattr(facts, "notes", ())),
        )


class BackendError(CatchupError):
    """Anything a backend raises through the protocol is one of these kinds."""


class AlreadyExists(BackendError):
    """The attempt was created first by another dispatcher of this mission, or by this one before a
    restart (HTTP 409 on an object with the mission's identity): adopt it (L11)."""


class ForeignObject(BackendError):
    """The attempt's name is held by an object this mission did not make (issue 45): another
    deployment's, or anyone's who can create in the namespace. It is not adopted, never deleted,
    never read for results or logs. `retry`: the attempt's next number has a name of its own (a Job);
    False: no number frees the name (the range's PVC), so the range cannot run until it is removed."""

    def __init__(self, what: str, retry: bool = True, told: bool = False) -> None:
        super().__init__(what)
        self.retry = retry
        self.told = told  # the backend already warned of this object (its observe saw it first)


class TransientBackendError(BackendError):
    """The backend could not answer now (429, 5xx, a reset, a timeout, an attempt
    still running): the caller tries again on a later pass and charges no range."""


def deferred(mission: str, call: str, exc: Exception) -> None:
    """A call the backend could not answer now: no range is charged; a later pass retries it."""
    log.warning("mission %s: %s deferred to a later pass: %s", mission, call, exc)


class Busy(TransientBackendError):
    """Refused for now: an attempt still runs where the call would free something."""


class DispatchBlocked(BackendError):
    """A configuration fault every attempt would hit (bad image, missing config):
    stop new dispatches with this error instead of burning every range's budget."""


class Backend(Protocol):
    """Five calls for the dispatcher and one for a stopping run.

    Errors: every call may raise `TransientBackendError` (the dispatcher retries
    it on a later pass, never charging a range); `submit` also raises
    `AlreadyExists` (adopt it: an attempt this mission made), `ForeignObject` (its name is taken
    by an object it did not make: never adopted) and `DispatchBlocked` (stop new dispatches).
    Anything else is a bug or a permanent fault and ends the run with its
    cause. Constructing a backend does no I/O.
    """

    def submit(self, spec: AttemptSpec) -> None:
        """Start the attempt. Raises AlreadyExists if it is already there."""

    def observe(self) -> list[AttemptState]:
        """Every attempt of this mission the backend still holds, live or finished."""

    def collect(self, state: AttemptState, log_url: Callable[[int], str]) -> Collected:
        """Final read of a finished attempt: peaks, metrics, its log archived to
        `log_url(state.attempt)`, and the logs of earlier attempts of the range that
        its worker shipped from the volume, each to `log_url(n)` if that is missing
        or shorter (L31)."""

    def release(self, state: AttemptState) -> None:
        """Forget a finished attempt whose record is durable (delete the Job) (L2, L32)."""

    def release_range(self, range_key: str) -> None:
        """Free the range's kept data (PVC, data directory) once it is complete (L3)."""

    def shutdown(self, grace: float) -> list[str]:
        """Stop this mission's live attempts within `grace` seconds, their kept data left
        for a later run to resume (L37); the ids of those still alive afterwards."""


class LogUnavailable(BackendError):
    """The attempt's log cannot be read now, and why (its pod pending, its container waiting)."""


class LiveLogs(Protocol):
    """An attempt's log as its backend holds it while it lives: the operator's `catchup-assets logs`,
    one reader at a time. The dispatcher never calls it: it reads a log once, at the end (L30, L31)."""

    def read_log(
        self,
        range_key: str,
        attempt: int,
        follow: bool = False,
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
    ) -> Iterator[str] | None:
        """Its last `tail_lines` lines, at most `limit_bytes` bytes of them; following, then each new
        line as it is written, until the attempt ends. None: the backend holds no log of it (never
        started here, or released: its archive is the log). May raise LogUnavailable."""


class Records(Protocol):
    """A mission's attempt records, as the dispatcher reads and writes them (`store.records.RecordStore`).

    `write` may raise `record.UnrecordableRecord` for a value the storage cannot hold.
    """

    def log_url(self, range_key: str, attempt: int) -> str: ...
    def write(self, rec: AttemptRecord, existing: AttemptRecord | None = None) -> AttemptRecord: ...
    def read_one(self, range_key: str, attempt: int) -> AttemptRecord | None: ...
    def is_done(self, range_key: str, attempt: int) -> bool: ...
    def mark_done(self, range_key: str, attempt: int) -> None: ...
    def load(
        self, keys: Iterable[str] | None = None
    ) -> tuple[dict[tuple[str, int], AttemptRecord], set[tuple[str, int]]]: ...
    def load_range(
        self, range_key: str, other_than: str | None = None
    ) -> tuple[dict[int, AttemptRecord], set[int], dict[int, float]]: ...
    def sweep_tmp(self, now: float) -> int: ...
    def append_segment(self, records: Iterable[AttemptRecord]) -> None: ...
    def write_snapshot(
        self, records: Mapping[tuple[str, int], AttemptRecord], done: Iterable[tuple[str, int]]
    ) -> str: ...
    def claim(self, range_key: str, attempt: int, holder: str, now: float) -> bool: ...
    def claim_holder(self, range_key: str, attempt: int) -> str | None: ...
    def mark_reset(self, range_key: str, after_attempt: int) -> None: ...
    def load_resets(self, keys: Iterable[str] | None = None) -> dict[str, int]: ...


@dataclass(frozen=True)
class Leftover:
    """One object a mission left on its backend: an attempt (a Job, an attempt directory) or a
    range's kept data (a PVC, a data directory), with what it holds."""

    kind: str  # ATTEMPT or VOLUME
    name: str  # the Job's or PVC's name, the directory's path
    range_key: str | None  # None: not labelled with a range
    live: bool = False  # an attempt still running (a Job not finished, a supervisor alive)
    size_bytes: int = 0  # a volume's size: its claim's request or capacity, a directory's bytes
    attempt: int | None = None  # an attempt's number (its record's), None if unlabelled

    ATTEMPT = "attempt"
    VOLUME = "volume"


class Cleanup(Protocol):
    """What a backend offers to clean up after a mission (`mission/cleanup.py`), the mission's own
    objects only, found by its label or its directory. Both calls may raise TransientBackendError."""

    def leftovers(self) -> list[Leftover]:
        """Every attempt and volume of this mission the backend still holds, live or not."""

    def remove(self, leftovers: Iterable[Leftover]) -> list[Leftover]:
        """Delete them, attempts before volumes (a volume in use outlives its pod); what is still
        there afterwards (a claim the cluster is still releasing)."""

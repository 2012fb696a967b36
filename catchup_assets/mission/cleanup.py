"""Clean up after an abandoned mission: delete the Jobs and PVCs (locally, the attempt and
data directories) it left on its backend, keeping by default the volumes of ranges that
can resume.

A range can resume unless the records say it completed: an attempt of it done-marked `ok`.
Its volume holds the database a later run resumes from (the worker declines a volume
without its range marker, so keeping one too many costs disk, never correctness).

No attempt goes whose record is not durable (issue 36 item 9): one without a done mark is
kept, and so is its range's volume, even with `all` (mission/cleanup_settle.py records the
finished ones before the plan is made).

A run of the mission is live, and cleanup refuses unless forced, when:
- the backend still holds a live attempt of it (a Job not finished, a supervisor alive):
  a dispatcher may be running it, or a restarted one (run_retries, T2) would adopt it;
- a claim of it younger than `claim_grace_seconds` has no done mark: a dispatcher's
  submit in flight (core/dispatch/claims.py);
- a caller that knows of runs (a run tagged with the mission not finished, or failed and
  awaiting its retry) says so, through `also_live`; one that could not ask Dagster says
  so through `unchecked`, and that too is refused unless forced.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.ports import Cleanup, Leftover
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.core.units import GiB
from catchup_assets.mission.saved import mission_doc
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

WAIT_POLL_SECONDS = 2.0  # between reads of what a cleanup deleted and is not gone yet
CLAIM_GRACE_SECONDS = DispatchConfig.__dataclass_fields__["claim_grace_seconds"].default


class MissionLive(ConfigError):
    """Cleanup refused: a run of the mission is live (names `force`, which overrides it)."""


@dataclass(frozen=True)
class CleanupPlan:
    mission: str
    delete: tuple[Leftover, ...]
    keep: tuple[Leftover, ...]  # volumes of ranges that can resume
    live: tuple[str, ...] = ()  # why a run of the mission is judged live; empty: none is
    everything: bool = False
    unrecorded: tuple[Leftover, ...] = ()  # attempts without a durable record: never deleted
    unchecked: tuple[str, ...] = ()  # whose runs could not be asked about, and why

    @property
    def refused_without_force(self) -> bool:
        return bool(self.live or self.unchecked)

    @property
    def freed_bytes(self) -> int:
        return sum(o.size_bytes for o in self.delete)

    @property
    def kept_bytes(self) -> int:
        return sum(o.size_bytes for o in self.keep)

    def lines(self) -> list[str]:
        """What each choice frees, said before anything is deleted."""
        attempts = [o for o in self.delete if o.kind == Leftover.ATTEMPT]
        volumes = [o for o in self.delete if o.kind == Leftover.VOLUME]
        live = sum(o.live for o in (*attempts, *self.unrecorded))
        out = [
            f"mission {self.mission}: {len(attempts) + len(self.unrecorded)} attempts ({live} live) and "
            f"{len(volumes) + len(self.keep)} volumes holding {gib(self.freed_bytes + self.kept_bytes)} left",
            f"  delete: {len(attempts)} attempts, {len(volumes)} volumes: frees {gib(self.freed_bytes)}",
        ]
        if self.keep:
            keys = sorted({o.range_key for o in self.keep if o.range_key})
            shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
            out.append(
                f"  keep:   {len(self.keep)} volumes of ranges that can resume ({shown}): {gib(self.kept_bytes)}; "
                f"--all deletes them too, freeing {gib(self.freed_bytes + self.kept_bytes)}"
            )
        elif not self.everything:
            out.append("  keep:   nothing: no range that can resume has a volume")
        if self.unrecorded:
            names = ", ".join(_attempt_name(o) for o in self.unrecorded[:5])
            out.append(
                f"  kept:   {len(self.unrecorded)} attempts without a durable record ({names}): a cleanup "
                "records each finished one first, and deletes none it could not record"
            )
        out += [f"  live:   {why}" for why in self.live]
        out += [f"  unchecked: {why}" for why in self.unchecked]
        return out


def _attempt_name(o: Leftover) -> str:
    return f"{o.range_key} a{o.attempt:03d}" if o.range_key and o.attempt is not None else o.name


@dataclass(frozen=True)
class CleanupResult:
    plan: CleanupPlan
    removed: tuple[Leftover, ...] = ()
    still_there: tuple[Leftover, ...] = ()  # deleted, not yet gone (a claim the cluster still releases)
    dry_run: bool = False
    forced: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def deleted(self) -> tuple[Leftover, ...]:
        """Every object whose delete the backend took: gone, or still being released."""
        return self.removed + self.still_there

    @property
    def freed_bytes(self) -> int:
        return sum(o.size_bytes for o in self.removed if o.kind == Leftover.VOLUME)

    @property
    def pending_bytes(self) -> int:
        """Held by volumes deleted but not gone yet: freed once their pods have ended."""
        return sum(o.size_bytes for o in self.still_there if o.kind == Leftover.VOLUME)

    def lines(self) -> list[str]:
        if self.dry_run:
            why = "a run is live" if self.plan.live else "Dagster's runs not checked" if self.plan.unchecked else ""
            refused = f" ({why}: refused without --force)" if why else ""
            return [f"dry run: nothing deleted{refused}"]
        attempts = sum(o.kind == Leftover.ATTEMPT for o in self.deleted)
        volumes = sum(o.kind == Leftover.VOLUME for o in self.deleted)
        pending = f" so far, {gib(self.pending_bytes)} more once the rest go" if self.still_there else ""
        out = [
            f"deleted {attempts} attempts and {volumes} volumes, freeing {gib(self.freed_bytes)}{pending}"
            + (
                (" (forced past a live run)" if self.plan.live else " (forced; Dagster's runs not checked)")
                if self.forced
                else ""
            )
        ]
        # A claim a pod still mounts stays until that pod is gone (the kubernetes.io/pvc-protection
        # finalizer); the garbage collector ends a deleted Job's pods on its own, so these go by themselves.
        out += [f"  still there: {o.kind} {o.name} (deleted; goes once its pods have ended)" for o in self.still_there]
        return out


class WaitProgress:
    """What a cleanup's wait for deleted objects to go says (`say`): at its start, then every `every` seconds."""

    def __init__(self, say: Callable[[str], None], every: float = 10.0):
        self.say, self.every, self.next = say, every, 0.0

    def said(self, left: tuple[Leftover, ...], waited: float) -> None:
        if waited >= self.next:
            volumes = sum(o.kind == Leftover.VOLUME for o in left)
            self.say(
                f"waiting for {len(left)} deleted objects to go ({volumes} volumes, each released once its "
                f"pods have ended): {waited:.0f} s"
            )
            self.next = waited + self.every


def gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


def completed_ranges(recs: dict, done: set) -> set[str]:
    return {key for (key, attempt), r in recs.items() if (key, attempt) in done and r.outcome == "ok"}


def young_claims(records: RecordStore, recs: dict, done: set, now: float, grace: float) -> list[str]:
    """Claims without a done mark younger than `grace`: a dispatcher's submits in flight."""
    keys = sorted({key for key, attempt in recs if (key, attempt) not in done})
    out = []
    for key in keys:
        _, done_here, claims = records.load_range(key)
        out += [f"{key} a{a:03d}" for a, at in sorted(claims.items()) if a not in done_here and now - at < grace]
    return out


def plan_cleanup(
    root: str,
    mission: str,
    backend: Cleanup,
    *,
    everything: bool = False,
    also_live: Iterable[str] = (),
    unchecked: Iterable[str] = (),
    now: float | None = None,
    claim_grace_seconds: float = CLAIM_GRACE_SECONDS,
) -> CleanupPlan:
    """What would be deleted and kept, and whether a run is live; nothing is deleted."""
    validate_mission(mission)
    store = Store(root)
    if mission_doc(store, mission) is None:
        raise ConfigError(f"mission: {mission!r} has no {layout.MISSION_FILE} under {store.root}: not a mission here")
    records = RecordStore(store, mission)
    now = time.time() if now is None else now
    found = backend.leftovers()
    recs, done = records.load()
    completed = completed_ranges(recs, done)
    unrecorded = tuple(o for o in found if o.kind == Leftover.ATTEMPT and (o.range_key, o.attempt) not in done)
    owed = {o.range_key for o in unrecorded}  # their volumes may hold their logs: kept, whatever `all` says
    resumable = [o for o in found if o.kind == Leftover.VOLUME and o.range_key and o.range_key not in completed]
    keep = tuple(
        o for o in found if o.kind == Leftover.VOLUME and ((o in resumable and not everything) or o.range_key in owed)
    )
    delete = tuple(o for o in found if o not in keep and o not in unrecorded)
    live = [f"{what} (by the backend)" for what in _live_attempts(found)]
    if claims := young_claims(records, recs, done, now, claim_grace_seconds):
        live.append(f"claims younger than {claim_grace_seconds:g} s, submits in flight: {', '.join(claims[:5])}")
    live += list(also_live)
    return CleanupPlan(mission, delete, keep, tuple(live), everything, unrecorded, tuple(unchecked))


def _live_attempts(found: list[Leftover]) -> list[str]:
    names = [o.name for o in found if o.kind == Leftover.ATTEMPT and o.live]
    if not names:
        return []
    return [f"{len(names)} live attempts: {', '.join(names[:5])}" + (" ..." if len(names) > 5 else "")]


def cleanup(
    plan: CleanupPlan,
    backend: Cleanup,
    *,
    force: bool = False,
    dry_run: bool = False,
    wait_seconds: float = 0.0,
    on_wait: Callable[[tuple[Leftover, ...], float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CleanupResult:
    """Delete what the plan chose; refused (MissionLive, naming `force`) while a run is live unless forced.

    Then wait up to `wait_seconds` for what was deleted to be gone, as `kubectl delete` waits on
    finalizers: a volume goes only once the pods mounting it have ended. `on_wait(still there, waited)`
    is told each poll, for progress."""
    if dry_run:
        return CleanupResult(plan, dry_run=True)
    if plan.live and not force:
        raise MissionLive(
            f"force: a run of mission {plan.mission} is live ({'; '.join(plan.live)}); "
            "stop it first (terminate the run), or force the cleanup"
        )
    if plan.unchecked and not force:
        raise MissionLive(
            f"force: could not check whether a Dagster run of mission {plan.mission} can still run or retry "
            f"({'; '.join(plan.unchecked)}); point DAGSTER_HOME at the deployment's instance, or force the cleanup"
        )
    left = tuple(backend.remove(plan.delete))
    start = clock()
    while left and clock() - start < wait_seconds:
        if on_wait is not None:
            on_wait(left, clock() - start)
        sleep(min(WAIT_POLL_SECONDS, max(0.0, wait_seconds - (clock() - start))))
        there = {(o.kind, o.name) for o in backend.leftovers()}
        left = tuple(o for o in left if (o.kind, o.name) in there)
    there = {(o.kind, o.name) for o in left}
    gone = tuple(o for o in plan.delete if (o.kind, o.name) not in there)
    return CleanupResult(plan, gone, left, forced=plan.refused_without_force)

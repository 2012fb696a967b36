"""The demo: two missions over a simulated history, run through Dagster on a persistent instance.

The first mission runs with no profile (every range on the catch-all tier, OOMs
climb the ladder); the second is sized from the first's profile, longest first.
Memory is the production model scaled down (`memory_scale`), so the same
ladder, margins and headroom apply in MiB instead of GiB.

Each mission is what an operator does in the UI, in the same order, on the same
instance: materialize `mission_plan`, run `range_catchup_job` over the plan's
partitions as one run, run `profile_job` (range_profile, tier_map, profile_diff). The demo's
directory keeps the Dagster home (SQLite), the storage root (Parquet), the
local backend's work directory and the code location the UI opens:

    <dir>/dagster_home/          DAGSTER_HOME: dagster.yaml, runs, events
    <dir>/storage/<mission>/     plan, attempts, logs, range_profile, tier_map, profile_diff
    <dir>/work/                  attempts in flight, per-range data directories
    <dir>/catchup_location.py    the definitions with the demo's CatchupResource
    <dir>/workspace.yaml         what `dagster dev -w` loads

Progress is read from durable state only (attempt records and the backend's
registry), as any second observer would, never from the dispatcher's memory.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from shlex import quote as q
from typing import Any, TextIO

import dagster as dg

from catchup_assets.core.classify.outcomes import Action, RetryPolicy, decide
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.dispatch.reconciler import Status, past_attempts
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS, MissionSpan
from catchup_assets.core.size.cost import COST_NOTE
from catchup_assets.defs.assets.range_assets import (
    MISSION_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    ledger_ranges_partitions_def,
)
from catchup_assets.defs.location import load_location, project_root, ui_command, write_home, write_location
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.mission import PLAN_FILE, PROFILE_DIFF_FILE, PROFILE_FILE, TIER_MAP_FILE, read_table
from catchup_assets.mission.report import MissionSummary, cost_verdict, side_by_side, summarize
from catchup_assets.sim.model import HISTORY_LEDGERS
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

AFTER_RUN_TAG = "catchup/after-run"  # the range_catchup run a profile_job run follows


@dataclass(frozen=True)
class DemoSettings:
    directory: Path
    ranges: int = 48
    parallelism: int = 8
    speed: float = 300_000.0  # simulated seconds per real second
    memory_scale: float = 1 / 200
    disruption_rate: float = 0.07
    seed: int = 0
    poll_seconds: float = 0.25

    def __post_init__(self) -> None:
        if self.ranges < 1:
            raise ValueError(f"ranges must be >= 1, got {self.ranges}")
        if self.parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {self.parallelism}")
        if self.speed <= 0 or not 0 < self.memory_scale <= 1:
            raise ValueError("speed must be > 0 and memory_scale in (0, 1]")
        if not 0 <= self.disruption_rate < 1:
            raise ValueError(f"disruption_rate must be in [0, 1), got {self.disruption_rate}")

    @property
    def home(self) -> Path:
        return self.directory / "dagster_home"

    @property
    def storage_root(self) -> str:
        return str(self.directory / "storage")

    def span(self) -> MissionSpan:
        # The whole simulated history cut into `ranges` grid-aligned pieces.
        per = math.ceil(HISTORY_LEDGERS / self.ranges / CHECKPOINT_LEDGERS) * CHECKPOINT_LEDGERS
        return MissionSpan(1, per * self.ranges, ledgers_per_range=per, overlap=0)

    def catchup(self) -> dict[str, Any]:
        """The `CatchupResource` fields of the demo: what its runs and its UI both use."""
        return dict(
            storage_root=self.storage_root,
            memory_scale=self.memory_scale,
            sim_speed=self.speed,
            sim_seed=self.seed,
            disruption_rate=self.disruption_rate,
            poll_seconds=self.poll_seconds,
            status_every=max(1, round(5 / self.poll_seconds)),  # a status line in the run's log every ~5 s
            # What the UI's launchpad offers for mission_plan: this demo's grid, not production's.
            mission_defaults=dict(
                first_ledger=self.span().first_ledger,
                last_ledger=self.span().last_ledger,
                ledgers_per_range=self.span().ledgers_per_range,
                overlap=self.span().overlap,
                parallelism=self.parallelism,
                max_parallelism=self.parallelism,
            ),
        )

    def plan_config(self, mission: str, previous_profile: str | None, order: str) -> dict[str, Any]:
        """`mission_plan`'s run config: the fields an operator fills in the launchpad."""
        span = self.span()
        return {
            "mission": mission,
            "first_ledger": span.first_ledger,
            "last_ledger": span.last_ledger,
            "ledgers_per_range": span.ledgers_per_range,
            "overlap": span.overlap,
            "order": order,
            "parallelism": self.parallelism,
            "previous_profile": previous_profile or "",
        }


class DemoFailed(Exception):
    """A run failed for a reason other than condemned ranges (those are reported, not raised)."""


class ProgressBar:
    """Ranges done / in flight / condemned on one line (a line every few seconds off a terminal)."""

    def __init__(self, label: str, total: int, stream: TextIO = sys.stderr):
        self.label, self.total, self.stream = label, total, stream
        self.tty = stream.isatty()
        self.last_print = 0.0
        self.last_text = ""

    def __call__(self, s: Status, final: bool = False) -> None:
        width = 30
        filled = int(width * s.completed / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        text = (
            f"{self.label} [{bar}] done {s.completed}/{self.total}  in flight {s.in_flight}  "
            f"queued {s.queued}  condemned {s.condemned}"
        )
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif (now - self.last_print >= 5 or final) and text != self.last_text:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_print, self.last_text = now, text

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


@dataclass
class RangeStates:
    """What the durable state says about a mission's ranges."""

    done: set[str]
    condemned: dict[str, str]
    in_flight: int

    def status(self, total: int) -> Status:
        queued = max(0, total - len(self.done) - len(self.condemned) - self.in_flight)
        return Status(0, len(self.done), self.in_flight, queued, len(self.condemned), total, 0)


def judge_from_records(
    records: RecordStore, keys: Iterable[str], retry: RetryPolicy, memory_cap_bytes: int | None = None
) -> tuple[set[str], dict[str, str]]:
    """Done and condemned ranges, decided from the attempt records as the dispatcher decides them."""
    keys = list(keys)
    recs, marked = records.load(keys)
    resets = records.load_resets(keys)
    by_key: dict[str, dict[int, Any]] = defaultdict(dict)
    done_by_key: dict[str, set[int]] = defaultdict(set)
    for (key, attempt), rec in recs.items():
        by_key[key][attempt] = rec
    for key, attempt in marked:
        done_by_key[key].add(attempt)
    history = {key: past_attempts(by_key[key], done_by_key[key], resets.get(key, 0)) for key in keys}
    done, condemned = set(), {}
    for key in keys:
        decision = decide(history[key], retry, memory_cap_bytes)
        if decision.action is Action.DONE:
            done.add(key)
        elif decision.action is Action.CONDEMNED:
            condemned[key] = decision.reason
    return done, condemned


def observe(catchup: CatchupResource, mission: str, keys: list[str], backend: Backend | None = None) -> RangeStates:
    """Done and condemned from the attempt records; in flight from the backend itself (L10)."""
    records = RecordStore(Store(catchup.root()), mission)
    done, condemned = judge_from_records(records, keys, catchup.retry_policy(), catchup.placement().ladder.cap_bytes)
    wanted = set(keys)
    backend = backend or catchup.backend_for(mission)  # an observer of its own, not the dispatcher's
    live = {s.range_key for s in backend.observe() if s.live and s.range_key in wanted}
    return RangeStates(done, condemned, len(live - done - set(condemned)))


class Poller(threading.Thread):
    """Draws the progress bar from durable state while the run executes in the main thread."""

    def __init__(self, bar: ProgressBar, catchup: CatchupResource, mission: str, keys: list[str], every: float = 0.5):
        super().__init__(name=f"progress-{mission}", daemon=True)
        self.bar, self.catchup, self.mission, self.keys, self.every = bar, catchup, mission, keys, every
        self.finished = threading.Event()
        self.backend = catchup.backend_for(mission)

    def run(self) -> None:
        while not self.finished.wait(self.every):
            try:
                self.bar(observe(self.catchup, self.mission, self.keys, self.backend).status(len(self.keys)))
            except Exception:  # noqa: BLE001 - a torn read costs one frame of the bar, never the run
                continue

    def stop(self) -> RangeStates:
        self.finished.set()
        self.join()
        states = observe(self.catchup, self.mission, self.keys, self.backend)
        self.bar(states.status(len(self.keys)), final=True)
        self.bar.close()
        return states


@dataclass
class MissionOutcome:
    mission: str
    summary: MissionSummary
    condemned: dict[str, str]
    paths: dict[str, str]
    run_ids: dict[str, str]


def _quiet(level: str) -> dict[str, Any]:
    return {"loggers": {"console": {"config": {"log_level": level}}}}


def _failure_text(result: dg.ExecuteInProcessResult) -> str:
    errors = [e.event_specific_data.error for e in result.all_events if e.is_failure and e.event_specific_data]
    messages = dict.fromkeys(err.message.strip() for err in errors if err is not None)  # the step's and the run's
    return "; ".join(messages) or "run failed"


def _contiguous(instance: dg.DagsterInstance, keys: list[str]) -> tuple[str, str]:
    """The plan's keys as one span of the instance's key order (a run covers one span)."""
    order = instance.get_dynamic_partitions(ledger_ranges_partitions_def.name)
    index = {k: i for i, k in enumerate(order)}
    missing = [k for k in keys if k not in index]
    if missing:
        raise DemoFailed(f"plan keys missing from partitions {ledger_ranges_partitions_def.name}: {missing[:3]}")
    lo, hi = min(index[k] for k in keys), max(index[k] for k in keys)
    if hi - lo + 1 != len(keys):
        raise DemoFailed("the plan's partitions are not contiguous in the instance's key order")
    return order[lo], order[hi]


def run_one(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    settings: DemoSettings,
    mission: str,
    previous: str | None,
    order: str,
    log_level: str = "CRITICAL",
) -> MissionOutcome:
    catchup: CatchupResource = defs.resources["catchup"]
    store = Store(catchup.root())
    tags = {MISSION_TAG: mission}
    run_ids: dict[str, str] = {}

    plan_run = defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config={
            "ops": {"mission_plan": {"config": settings.plan_config(mission, previous, order)}},
            **_quiet(log_level),
        },
        instance=instance,
        tags=tags,
        raise_on_error=False,
    )
    run_ids["mission_plan_job"] = plan_run.run_id
    if not plan_run.success:
        raise DemoFailed(f"mission_plan of {mission}: {_failure_text(plan_run)}")
    keys = sorted(read_table(store, f"{mission}/{PLAN_FILE}").column("range_key").to_pylist())
    first, last = _contiguous(instance, keys)

    run_id = str(uuid.uuid4())  # what Dagster makes a run id of
    bar = ProgressBar(mission, len(keys))
    poller = Poller(bar, catchup, mission, keys)
    started = time.monotonic()
    poller.start()
    try:
        catchup_run = defs.resolve_job_def("range_catchup_job").execute_in_process(
            run_config=_quiet(log_level),
            instance=instance,
            tags={**tags, RANGE_START_TAG: first, RANGE_END_TAG: last},
            run_id=run_id,
            raise_on_error=False,
        )
    finally:
        states = poller.stop()
    wall = time.monotonic() - started
    run_ids["range_catchup_job"] = catchup_run.run_id
    if not catchup_run.success and not states.condemned:
        raise DemoFailed(f"range_catchup of {mission} (run {run_id}): {_failure_text(catchup_run)}")

    # Tagged as mission_finished_sensor tags the profile it requests after a run.
    profile_run = defs.resolve_job_def("profile_job").execute_in_process(
        run_config=_quiet(log_level), instance=instance, tags={**tags, AFTER_RUN_TAG: run_id}, raise_on_error=False
    )
    run_ids["profile_job"] = profile_run.run_id
    if not profile_run.success:
        raise DemoFailed(f"profile_job of {mission}: {_failure_text(profile_run)}")

    records, done = RecordStore(store, mission).load()
    summary = summarize(
        mission,
        [r for i, r in records.items() if i in done],
        catchup.placement(),
        len(keys),
        len(states.condemned),
        time_scale=catchup.sim_speed,
        plan_rows=read_table(store, f"{mission}/{PLAN_FILE}").to_pylist(),
    )
    paths = {
        "plan": store.url(f"{mission}/{PLAN_FILE}"),
        "attempts": store.url(f"{mission}/attempts"),
        "profile": store.url(f"{mission}/{PROFILE_FILE}"),
        "tier map": store.url(f"{mission}/{TIER_MAP_FILE}"),
    }
    if store.exists(f"{mission}/{PROFILE_DIFF_FILE}"):
        paths["diff"] = store.url(f"{mission}/{PROFILE_DIFF_FILE}")  # profile_diff: against the one before
    return MissionOutcome(mission, replace(summary, wall_seconds=wall), states.condemned, paths, run_ids)


def diff_command(storage_root: str, a: str, b: str, memory_scale: float) -> str:
    """The shell command that prints `catchup-assets diff` of the two missions, in production figures."""
    cmd = f"catchup-assets diff --root {q(storage_root)} {a} {b} --memory-scale {memory_scale:g}"
    root = project_root()
    return cmd if root is None else f"cd {q(str(root))} && uv run {cmd}"


def run_demo(settings: DemoSettings, out: TextIO = sys.stdout, log_level: str = "CRITICAL") -> int:
    settings.directory.mkdir(parents=True, exist_ok=True)
    home = settings.home
    write_home(home)
    workspace = write_location(settings.directory, settings.catchup())
    # The very file the UI loads: the runs below use its resources, not a copy of them.
    defs = load_location(settings.directory)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    first, second = f"demo-{stamp}-a", f"demo-{stamp}-b"
    started = time.monotonic()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        try:
            a = run_one(instance, defs, settings, first, None, "tip-first", log_level)
            b = run_one(instance, defs, settings, second, a.paths["profile"], "longest-first", log_level)
        except DemoFailed as exc:
            print(f"catchup-assets demo: {exc}", file=sys.stderr)
            print(f"\nthe runs are in the Dagster UI:\n  {ui_command(home, workspace)}", file=sys.stderr)
            return 1
    total = time.monotonic() - started
    memory_scale = defs.resources["catchup"].memory_scale
    print("\n" + side_by_side([a.summary, b.summary], memory_scale), file=out)
    print(
        "\nmemory, node and dollar figures in production scale (the demo runs memory x "
        f"{memory_scale:g} and time x {settings.speed:,.0f}); wall time is real "
        f"(the range_catchup run; both missions with planning and profiling took {total:.0f} s)",
        file=out,
    )
    print(f"cost: {cost_verdict(a.summary, b.summary)}; {COST_NOTE}", file=out)
    for m in (a, b):
        print(f"\n{m.mission}:", file=out)
        for what, path in m.paths.items():
            print(f"  {what:<9} {path}", file=out)
        for key, why in sorted(m.condemned.items()):
            print(f"  condemned {key}: {why}", file=out)
    print(
        "\nthe two missions by ledger band (memory requested, peaks, time, regressions; "
        f"profile_diff in the UI):\n  {diff_command(settings.storage_root, a.mission, b.mission, memory_scale)}",
        file=out,
    )
    print(f"\nDagster instance  {home}", file=out)
    print(
        "open it in the UI (runs, partitions, the profile's plots; launch the next mission):\n"
        f"  {ui_command(home, workspace)}",
        file=out,
    )
    return 1 if a.condemned or b.condemned else 0

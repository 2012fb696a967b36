"""One mission end to end: plan, dispatch, profile, tier map.

The Dagster assets and the CLI both call these functions; nothing here knows
which backend runs the attempts.

Every path it reads and writes under the storage root is store/layout.py's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from catchup_assets.core.aggregate.diff import ProfileDiff, Side, check_diff_columns, compare, requested_by_range
from catchup_assets.core.aggregate.profile import profile_rows
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.dispatch.reconciler import (
    Clock,
    DispatchConfig,
    Dispatcher,
    MissionResult,
    RangeResult,
    Status,
)
from catchup_assets.core.plan.config import MissionConfig, validate_mission
from catchup_assets.core.plan.ranges import LedgerRange, MissionSpan, dispatch_order, parse_key, plan_ranges
from catchup_assets.core.size.catalog import DEFAULT_CATALOG
from catchup_assets.core.size.cost import MissionCost, mission_cost
from catchup_assets.core.size.fit import FitResult, FitSettings, chart_values, evaluate, fit_ladder, profile_ranges
from catchup_assets.core.size.forecast import WHAT_IF_FACTORS, Forecast, estimates, what_if
from catchup_assets.core.size.sizing import Placement
from catchup_assets.store import layout
from catchup_assets.store.profiles import PreviousProfile, load_previous_profile
from catchup_assets.store.records import AttemptRecord, RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import (
    PROFILE_SCHEMA,
    Table,
    band_table,
    parse_table,
    plan_table,
    read_table,
    table,
    tier_map_table,
    write_table,
)

log = logging.getLogger(__name__)


@dataclass
class PreparedMission:
    config: MissionConfig
    ordered: list[LedgerRange]
    previous: PreviousProfile
    plan: Table

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.ordered]


def prepare(config: MissionConfig, keys: list[str] | None = None) -> PreparedMission:
    """Validate everything, load the previous profile, order the ranges (L34, L35).

    `keys` narrows the mission to those ranges (a backfill of some partitions).
    """
    previous = load_previous_profile(
        config.previous_profile, config.profile_timeout_seconds, config.previous_profile_sha256
    )
    planned = plan_ranges(config.span)
    if keys is not None:
        wanted = {parse_key(k) for k in keys}
        outside = sorted(r.key for r in wanted - set(planned))
        if outside:
            raise ValueError(f"range keys not in the mission's span: {outside[:5]}")
        planned = [r for r in planned if r in wanted]
    seconds = {}
    if config.order == "longest-first" and previous.index is not None:
        for r in planned:
            m = previous.index.lookup(r.last)
            if m is not None and m.seconds is not None:
                seconds[r.key] = m.seconds
    ordered = dispatch_order(planned, config.order, seconds)
    plan = plan_table(ordered, config.span.overlap, previous.index, config.placement)
    return PreparedMission(config, ordered, previous, plan)


def forecast_mission(prepared: PreparedMission, factors=WHAT_IF_FACTORS) -> list[Forecast]:
    """Predicted makespan and node-hours at the configured parallelism times each factor; [] unprofiled."""
    cfg = prepared.config
    est = estimates(prepared.ordered, prepared.previous.index, cfg.placement)
    return [] if est is None else what_if(est, cfg.parallelism, factors)


def predict_cost(prepared: PreparedMission) -> MissionCost | None:
    """What the plan's first attempts cost at the profile's seconds; None unprofiled (nothing to time)."""
    cfg = prepared.config
    est = estimates(prepared.ordered, prepared.previous.index, cfg.placement)
    return None if est is None else mission_cost((e.use() for e in est), cfg.placement)


def run_mission(
    prepared: PreparedMission,
    backend: Backend,
    *,
    clock: Clock | None = None,
    on_status: Callable[[Status], None] | None = None,
    on_result: Callable[[RangeResult, bool], None] | None = None,
    on_health: Callable[[str, bool, str], None] | None = None,
    write_plan: bool = True,
    reset_condemned: bool = False,
    holder: str | None = None,
) -> MissionResult:
    cfg = prepared.config
    store = Store(cfg.storage_root)
    if write_plan:
        write_table(store, layout.plan(cfg.mission), prepared.plan)
    dispatch_cfg = DispatchConfig(
        cfg, prepared.ordered, prepared.previous.index, reset_condemned=reset_condemned, holder=holder
    )
    dispatcher = Dispatcher(
        dispatch_cfg,
        backend,
        RecordStore(store, cfg.mission),
        clock=clock,
        on_status=on_status,
        on_result=on_result,
        on_health=on_health,
    )
    return dispatcher.run()


@dataclass
class ProfileOutput:
    profile: Table
    unmeasured: list[str]
    url: str
    records: list[AttemptRecord] = field(default_factory=list)  # every finished attempt the profile read


def require_plan(store: Store, mission: str) -> None:
    """A mission to profile or map is a planned one: refused, naming where its plan should be,
    before anything is written (a typo'd name must not leave an empty profile behind)."""
    validate_mission(mission)
    if not store.exists(layout.plan(mission)):
        raise ValueError(
            f"mission {mission!r} has no plan at {store.url(layout.plan(mission))}: "
            "plan it first (mission_plan), or check the mission name and storage root"
        )


def build_profile(storage_root: str, mission: str) -> ProfileOutput:
    """Every finished attempt record of the mission -> range_profile.parquet."""
    store = Store(storage_root)
    record_store = RecordStore(store, mission)
    records, done = record_store.load()
    if record_store.files_read:
        record_store.write_snapshot(records, done)  # the next read of these records is one file
    finished = [r for ident, r in records.items() if ident in done]
    rows, unmeasured = profile_rows(finished)
    profile = table(rows, PROFILE_SCHEMA)
    return ProfileOutput(profile, unmeasured, write_table(store, layout.profile(mission), profile), finished)


def build_tier_map(
    storage_root: str,
    mission: str,
    placement: Placement = Placement(),
) -> tuple[Table, str]:
    """Every planned range of the mission placed from its profile -> tier_map.parquet."""
    store = Store(storage_root)
    require_plan(store, mission)
    plan = read_table(store, layout.plan(mission))
    ranges = sorted(parse_key(k) for k in plan.column("range_key").to_pylist())
    profile = read_table(store, layout.profile(mission)).to_pylist()
    table = tier_map_table(ranges, profile, placement)
    return table, write_table(store, layout.tier_map(mission), table)


@dataclass
class LadderOutput:
    fit: FitResult
    current: tuple[MissionCost, Forecast]  # the deployment's own ladder on the same ranges
    values: str  # the chart values of the fitted ladder, in production GiB
    url: str


def build_tier_ladder(
    storage_root: str, mission: str, placement: Placement, slots: int, memory_scale: float = 1.0
) -> LadderOutput:
    """The ladder fitted to the mission's profile -> tier_ladder.yaml (chart values), against the current one."""
    store = Store(storage_root)
    require_plan(store, mission)
    ranges, index = profile_ranges(read_table(store, layout.profile(mission)).to_pylist())
    # A scaled-down deployment (the demo) fits on a grid scaled alike, so its cuts are production's.
    settings = FitSettings(step_bytes=max(1, int(FitSettings().step_bytes * memory_scale)))
    fit = fit_ladder(ranges, index, placement, placement.catalog, slots, settings)
    custom = placement.catalog != DEFAULT_CATALOG.scaled(memory_scale)
    values = (
        f"# The tier ladder fitted to mission {mission}'s profile ({len(ranges)} ranges; docs/cost.md).\n"
        f"# Predicted cost {fit.cost.dollars:.4g} USD against {fit.cost.flat_dollars:.4g} flat, at this mission's\n"
        "# measured seconds (a scaled demo's are scaled down). Apply with\n"
        "# helm upgrade ... -f tier_ladder.yaml\n" + chart_values(fit.placement, memory_scale, with_catalog=custom)
    )
    rel = layout.tier_ladder(mission)
    store.write_bytes(rel, values.encode())
    return LadderOutput(fit, evaluate(ranges, index, placement, slots), values, store.url(rel))


_SPEC_FIELDS = ("mission", "order", "parallelism", "previous_profile", "previous_profile_sha256", "deadline_seconds")


def save_mission(
    store: Store, cfg: MissionConfig, previous: PreviousProfile | None = None, core_image: dict | None = None
) -> str:
    """The mission's own settings, so a later backfill of its ranges runs it the same way.

    The previous profile the plan was sized from is copied beside them, with its digest:
    every run of the mission dispatches from that copy, and refuses one that changed, so
    the plan shown is the plan run (a profile edited or gone at its URL changes nothing).
    `core_image` is the stellar-core the deployment runs ({"image", "tag", "digest"}:
    CatchupResource.core_image), kept so a diff of two missions names what each ran.
    """
    doc = {f: getattr(cfg, f) for f in _SPEC_FIELDS}
    if core_image is not None:
        doc["core_image"] = dict(core_image)
    if previous is not None and previous.data:
        rel = layout.previous_profile(cfg.mission)
        store.write_bytes(rel, previous.data)
        doc.update(
            previous_profile=store.url(rel),
            previous_profile_sha256=previous.sha256,
            previous_profile_source=cfg.previous_profile,
        )
    doc.update(
        first_ledger=cfg.span.first_ledger,
        last_ledger=cfg.span.last_ledger,
        ledgers_per_range=cfg.span.ledgers_per_range,
        overlap=cfg.span.overlap,
    )
    store.write_bytes(layout.mission_file(cfg.mission), json.dumps(doc, indent=1).encode())
    return store.url(layout.mission_file(cfg.mission))


def load_mission(store: Store, mission: str, **policies) -> MissionConfig:
    """A saved mission with this deployment's policies (retry, sizing, tiers, env...)."""
    validate_mission(mission)
    rel = layout.mission_file(mission)
    try:
        doc = json.loads(store.read_bytes(rel))
        span = MissionSpan(doc["first_ledger"], doc["last_ledger"], doc["ledgers_per_range"], doc["overlap"])
        fields = {f: doc.get(f) for f in _SPEC_FIELDS if f in doc or f == "previous_profile_sha256"}
        return MissionConfig(span=span, storage_root=store.root, **fields, **policies)
    except FileNotFoundError:
        raise ValueError(
            f"mission {mission!r} has no {layout.MISSION_FILE} under {store.root}: plan it first"
        ) from None
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{store.url(rel)} is not a mission file: {exc}") from exc


def mission_doc(store: Store, mission: str) -> dict | None:
    """The mission's saved mission.json as a dict; None if it has none (or it is not JSON)."""
    validate_mission(mission)
    try:
        doc = json.loads(store.read_bytes(layout.mission_file(mission)))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("%s is not a mission file: %s", store.url(layout.mission_file(mission)), exc)
        return None
    return doc if isinstance(doc, dict) else None


def mission_image(store: Store, mission: str) -> dict | None:
    """The stellar-core the mission recorded when planned; None for one planned before missions did."""
    image = (mission_doc(store, mission) or {}).get("core_image")
    return image if isinstance(image, dict) else None


def read_profile_rows(store: Store, rel: str) -> list[dict]:
    """A profile's rows for a diff; missing, not Parquet or not a profile: refused naming the file."""
    url = store.url(rel)
    try:
        data = store.read_bytes(rel)
    except FileNotFoundError:
        raise ValueError(f"profile {url} does not exist") from None
    try:
        table = parse_table(data)
    except Exception as exc:  # noqa: BLE001 - whatever the file is, it is not a profile: named
        raise ValueError(f"profile {url} is not a Parquet table: {exc}") from exc
    check_diff_columns(table.column_names, url)
    return table.to_pylist()


def requested_of(store: Store, mission: str) -> dict[str, int] | None:
    """Memory the mission's finished attempts requested per range (profile_diff.requested_by_range);
    None when the mission has no attempt records under this root."""
    validate_mission(mission)
    if not store.exists(layout.attempts(mission)):
        return None
    records, done = RecordStore(store, mission).load()
    return requested_by_range(r for ident, r in records.items() if ident in done)


def mission_side(store: Store, mission: str, profile_rel: str | None = None) -> Side:
    """A mission's side of a diff: its profile (by default its own range_profile.parquet), the
    memory its attempts requested and the stellar-core it recorded."""
    validate_mission(mission)
    rel = profile_rel or layout.profile(mission)
    if profile_rel is None and not store.exists(rel):
        if not store.exists(layout.plan(mission)):
            raise ValueError(f"no mission {mission!r} under {store.root} (no {store.url(layout.plan(mission))})")
        raise ValueError(f"mission {mission!r} has no profile at {store.url(rel)}: profile it first")
    rows = read_profile_rows(store, rel)
    return Side(mission, rows, requested_of(store, mission), mission_image(store, mission))


def diff_missions(storage_root: str, a: str, b: str, band_ledgers: int, threshold: float) -> ProfileDiff:
    """Two missions of one storage root compared by ledger band; a bad argument is named (A or B)."""
    store = Store(storage_root)
    sides = []
    for label, mission in (("A", a), ("B", b)):
        try:
            sides.append(mission_side(store, mission))
        except ValueError as exc:
            raise ValueError(f"{label} ({mission}): {exc}") from exc
    return compare(sides[0], sides[1], band_ledgers, threshold)


@dataclass
class DiffOutput:
    diff: ProfileDiff | None
    url: str | None  # the band table written, profile_diff.parquet
    note: str  # what was compared with what, or why nothing was
    image: dict | None = None  # this mission's stellar-core, also when there is no diff


def _previous_mission(rows: list[dict]) -> str | None:
    """The mission a profile was measured by, if it is one mission with a valid name."""
    names = {r.get("mission") for r in rows}
    if len(names) != 1:
        return None
    (name,) = names
    try:
        return validate_mission(name)
    except ValueError:
        return None


def build_profile_diff(storage_root: str, mission: str, band_ledgers: int, threshold: float) -> DiffOutput:
    """This mission's profile against the profile it was sized from -> profile_diff.parquet.

    A is the plan's own copy of the previous profile (previous_profile.parquet): what
    this mission was sized from. Its mission's attempt records and stellar-core are
    read from this storage root when that mission is there; else they are said to be
    unknown. A mission planned without a previous profile has nothing to compare.
    """
    store = Store(storage_root)
    require_plan(store, mission)
    doc = mission_doc(store, mission) or {}
    previous_rel = layout.previous_profile(mission)
    if not store.exists(previous_rel):
        note = f"mission {mission} was planned without a previous profile: nothing to compare"
        return DiffOutput(None, None, note, mission_image(store, mission))
    b = mission_side(store, mission)
    rows_a = read_profile_rows(store, previous_rel)
    source = doc.get("previous_profile_source") or store.url(previous_rel)
    name_a = _previous_mission(rows_a)
    if name_a is not None and name_a != mission and store.exists(layout.plan(name_a)):
        a = Side(name_a, rows_a, requested_of(store, name_a), mission_image(store, name_a))
    else:
        a = Side(name_a or str(source), rows_a)
    diff = compare(a, b, band_ledgers, threshold)
    url = write_table(store, layout.profile_diff(mission), band_table(diff))
    note = f"{mission} (B) against the profile it was sized from, {source} (A: {a.name})"
    return DiffOutput(diff, url, note, b.image)

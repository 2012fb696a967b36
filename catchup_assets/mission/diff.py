"""Diff two missions' profiles: each side read from the storage root, compared by ledger band
(core/aggregate/band_diff.py); a mission against the profile it was sized from -> profile_diff.parquet."""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.aggregate.band_diff import ProfileDiff, Side, check_diff_columns, compare, requested_by_range
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.mission.plan import require_plan
from catchup_assets.mission.saved import mission_doc, mission_image
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import NotATable, band_table, parse_table, write_table


def read_profile_rows(store: Store, rel: str) -> list[dict]:
    """A profile's rows for a diff; missing, not Parquet or not a profile: refused naming the file."""
    url = store.url(rel)
    try:
        data = store.read_bytes(rel)
    except FileNotFoundError:
        raise ConfigError(f"profile {url} does not exist") from None
    try:
        table = parse_table(data)
    except NotATable as exc:
        raise ConfigError(f"profile {url} is not a Parquet table: {exc}") from exc
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
            raise ConfigError(f"no mission {mission!r} under {store.root} (no {store.url(layout.plan(mission))})")
        raise ConfigError(f"mission {mission!r} has no profile at {store.url(rel)}: profile it first")
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
            raise ConfigError(f"{label} ({mission}): {exc}") from exc
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


def sized_from(storage_root: str, mission: str) -> str | None:
    """The mission whose profile `mission` was sized from (the plan's copy names it), if it is on this root."""
    store = Store(storage_root)
    validate_mission(mission)
    if not store.exists(layout.previous_profile(mission)):
        return None
    name = _previous_mission(read_profile_rows(store, layout.previous_profile(mission)))
    return name if name is not None and name != mission and store.exists(layout.plan(name)) else None


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

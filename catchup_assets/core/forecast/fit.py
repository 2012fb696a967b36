"""A tier ladder fitted to a profile: the cuts and node shapes that make the next mission cheapest.

Pure. Each profiled range is sized as the next mission would size it
(sizing.Placement), so its memory request, its home tier (the smallest cut
holding it) and its working-set bump (L27: one tier up) are the real ones.
The fit chooses up to `max_tiers` cuts, on a grid of `step_bytes`, and for each
tier the catalog shape that makes its ranges cheapest (cost.py: a range pays
the share of its node it requests). The last tier's cut is the memory
ladder's cap, so a range that OOMs always has a node to climb to (L6).

Because a tier's ranges depend on its own cut, the one below it and the one
below that (bumped ranges arrive from the tier below), the search is a
dynamic program over pairs of consecutive cuts: exact for the grid, so the
cost it reports is what `cost.mission_cost` computes for the ladder, and
adding a shape to the catalog can only lower it (every ladder costs at most
what it did before; the best of them too).

A ladder changes what a range costs, not how long it runs: every candidate
has the same predicted makespan (forecast.py), which the fit reports against
its lower bound and the stated tolerance rather than trades against cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.forecast.cost import MissionCost, mission_cost, node_share
from catchup_assets.core.forecast.forecast import Forecast, estimates, forecast
from catchup_assets.core.size.catalog import SPOT, Catalog, NodeShape
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.size.sizing import Placement, Tier, Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange, dispatch_order


class NothingToFit(ConfigError):
    """The profile times no range: there is nothing to fit a ladder to."""


NAMES = ("dwarf", "subgiant", "giant", "supergiant", "hypergiant", "supernova")
INF = math.inf


@dataclass(frozen=True)
class FitSettings:
    max_tiers: int = 4  # the last holds the memory ladder's cap
    cpu: float = 1.0  # each range pod's CPU request on the fitted tiers
    capacity_type: str = SPOT
    step_bytes: int = GiB // 2  # the grid cuts are chosen on
    tolerance: float = 0.03  # predicted makespan within this of its lower bound

    def __post_init__(self) -> None:
        if not 1 <= self.max_tiers <= len(NAMES):
            raise ConfigError(f"fit: max_tiers must be 1..{len(NAMES)}, got {self.max_tiers}")
        if not self.cpu > 0 or self.step_bytes <= 0 or self.tolerance < 0:
            raise ConfigError("fit: cpu and step must be > 0, tolerance >= 0")


@dataclass(frozen=True)
class FitResult:
    placement: Placement  # the fitted ladder, with the input's catch-alls, sizing and memory ladder
    cost: MissionCost
    forecast: Forecast
    within_tolerance: bool


def _grid(x: int, step: int) -> int:
    return -(-x // step) * step


def fit_ladder(
    ranges: Sequence[LedgerRange],
    profile: ProfileIndex,
    base: Placement,
    catalog: Catalog,
    slots: int,
    settings: FitSettings = FitSettings(),
) -> FitResult:
    """The cheapest ladder for `ranges` sized from `profile`; `base` gives sizing, memory ladder and catch-alls."""
    sizing = base.sizing
    cpu = sizing.cpu_request if sizing.cpu_request is not None else settings.cpu
    probe = Placement(base.tiers, sizing, base.ladder, base.catalog)
    rows = []  # (request, working set, seconds) of each range, as the next mission sizes it
    for r in ranges:
        m = profile.lookup(r.last)
        if m is None or m.seconds is None:
            continue
        s = probe.size(r.last, profile, first_ledger=r.first)
        if s.profiled:
            rows.append((s.memory_request_bytes, m.peak_working_set_bytes, m.seconds))
    if not rows:
        raise NothingToFit("fit: the profile times none of the ranges")
    step = settings.step_bytes
    # The top cut is the memory ladder's cap itself (off the grid, if need be), or above every range.
    top = max(base.ladder.cap_bytes, _grid(max(b for b, _, _ in rows), step))
    cuts = sorted({_grid(b, step) for b, _, _ in rows} - {top}) + [top]
    shapes = [s for s in catalog.shapes if s.allocatable_cpu >= cpu]
    table = _Table(rows, cuts, shapes, cpu, settings, sizing.cache_bump_ratio)
    chosen = table.solve(settings.max_tiers)
    ladder = tuple(
        Tier(NAMES[k], cuts[j], shape.memory_bytes, cpu, None, shape.name, settings.capacity_type)
        for k, (j, shape) in enumerate(chosen)
    )
    tiers = Tiers(ladder, _catch_all(base.tiers.unprofiled, catalog), _catch_all(base.tiers.no_profile, catalog))
    fitted = Placement(tiers, sizing, base.ladder, catalog)
    cost, f = evaluate(ranges, profile, fitted, slots)
    return FitResult(fitted, cost, f, f.makespan_seconds <= (1 + settings.tolerance) * f.lower_bound_seconds)


def evaluate(
    ranges: Sequence[LedgerRange], profile: ProfileIndex, placement: Placement, slots: int
) -> tuple[MissionCost, Forecast]:
    """The next mission's predicted cost and makespan on `placement`, dispatched longest first (L13)."""
    seconds = {r.key: m.seconds for r in ranges if (m := profile.lookup(r.last)) and m.seconds is not None}
    est = estimates(dispatch_order(ranges, "longest-first", seconds), profile, placement) or []
    return mission_cost((e.use() for e in est), placement), forecast(est, slots)


def _catch_all(tier: Tier, catalog: Catalog) -> Tier:
    """A catch-all kept as configured, or, when the catalog lacks its shape, on the cheapest one that holds it."""
    if tier.shape in {s.name for s in catalog.shapes}:
        return tier
    slots = tier.pods_per_node or 1
    fits = [
        s
        for s in catalog.shapes
        if s.allocatable_memory_bytes >= tier.memory_cut_bytes * slots and s.allocatable_cpu >= tier.cpu * slots
    ]
    if not fits:
        raise ConfigError(f"fit: no catalog shape holds catch-all tier {tier.name!r}")
    best = min(fits, key=lambda s: s.on_demand_hourly)
    return replace(tier, shape=best.name, node_memory_bytes=best.memory_bytes)


class _Table:
    """Sums of range costs per shape over (cut below, cut) pairs, split by whether the range stays or bumps."""

    def __init__(self, rows, cuts, shapes: list[NodeShape], cpu, settings: FitSettings, bump_ratio: float):
        self.cuts, self.shapes, self.n = cuts, shapes, len(cuts)
        n, step, index = self.n, settings.step_bytes, {c: i for i, c in enumerate(cuts)}
        packed = Tier("packed", 1, 1, cpu)  # pods_per_node None: the share is the range's requests
        bins: list[list[tuple[int | None, list[float]]]] = [[] for _ in range(n)]
        for b, ws, secs in rows:
            costs = [node_share(packed, s, b, cpu) * s.hourly(settings.capacity_type) * secs / 3600 for s in shapes]
            bins[index[_grid(b, step)]].append((ws, costs))
        # stay[s][j][h + 1] / out[s][j][h + 1]: cost on shape s of the ranges whose home cut is one of
        # cuts[0..h] and which stay under cut j / bump past it (L27), as prefix sums over h <= j.
        self.stay = [[[0.0] * (n + 1) for _ in range(n)] for _ in shapes]
        self.out = [[[0.0] * (n + 1) for _ in range(n)] for _ in shapes]
        for j in range(n):
            limit = cuts[j] * bump_ratio
            for h in range(j + 1):
                a, o = [0.0] * len(shapes), [0.0] * len(shapes)
                for ws, costs in bins[h]:
                    acc = o if ws is not None and ws > limit and j < n - 1 else a  # the top tier keeps all
                    for si, c in enumerate(costs):
                        acc[si] += c
                for si in range(len(shapes)):
                    self.stay[si][j][h + 1] = self.stay[si][j][h] + a[si]
                    self.out[si][j][h + 1] = self.out[si][j][h] + o[si]
        self.feasible = [
            [si for si, s in enumerate(shapes) if s.allocatable_memory_bytes >= cut and s.allocatable_cpu >= cpu]
            for cut in cuts
        ]

    def tier_cost(self, below2: int, below: int, j: int) -> tuple[float, int]:
        """The cheapest shape for the tier of cut j over cuts `below` and `below2` (-1: none): cost, shape."""
        best, arg = INF, -1
        for si in self.feasible[j]:
            stay = self.stay[si][j][j + 1] - self.stay[si][j][below + 1]
            bumped = self.out[si][below][below + 1] - self.out[si][below][below2 + 1] if below >= 0 else 0.0
            if stay + bumped < best - 1e-12:
                best, arg = stay + bumped, si
        return best, arg

    def solve(self, max_tiers: int) -> list[tuple[int, NodeShape]]:
        """The cheapest ladder of at most `max_tiers` cuts ending at the top one: (cut index, shape) per tier."""
        n, top = self.n, self.n - 1
        # levels[t][(i, j)] = (cost, i's predecessor, j's shape): the best t-tier ladder whose last two cuts
        # are i < j (i = -1: j alone), every range up to cut j placed but those bumping past j.
        levels: list[dict[tuple[int, int], tuple[float, int, int]]] = [{}]
        for j in range(n):
            c, si = self.tier_cost(-1, -1, j)
            if si >= 0:
                levels[0][(-1, j)] = (c, -2, si)
        for _ in range(max_tiers - 1):
            nxt: dict[tuple[int, int], tuple[float, int, int]] = {}
            for (i, j), (c, _, _) in levels[-1].items():
                for k in range(j + 1, n) if j != top else ():
                    t, si = self.tier_cost(i, j, k)
                    if si >= 0 and c + t < nxt.get((j, k), (INF,))[0] - 1e-12:
                        nxt[(j, k)] = (c + t, i, si)
            levels.append(nxt)
        ends = [(lv[key][0], t, key) for t, lv in enumerate(levels) for key in lv if key[1] == top]
        if not ends:
            raise ConfigError("fit: no catalog shape holds the memory ladder's cap")
        cheapest = min(c for c, _, _ in ends)
        # Of ladders that cost the same (to rounding), the one with the fewest tiers: fewer NodePools.
        near = [e for e in ends if e[0] <= cheapest * (1 + 1e-9) + 1e-12]
        _, t, (i, j) = min(near, key=lambda e: (e[1], e[0]))
        chosen = []
        while t >= 0:
            _, before, si = levels[t][(i, j)]
            chosen.append((j, self.shapes[si]))
            i, j, t = before, i, t - 1
        return chosen[::-1]


def profile_ranges(rows: Sequence[dict]) -> tuple[list[LedgerRange], ProfileIndex]:
    """The ranges of a profile table's rows (range_profile.parquet) and the index that sizes them."""
    from catchup_assets.core.size.measures import measures_from_rows
    from catchup_assets.core.values.ledger_range import parse_key

    index = ProfileIndex(measures_from_rows(rows))
    ranges = sorted({parse_key(r["range_key"]) for r in rows if r.get("range_key")})
    if not len(index) or not ranges:
        raise NothingToFit("fit: the profile has no measured ranges")
    return ranges, index


def _gib(x: int, scale: float) -> str:
    return f"{round(x / GiB / scale, 3):g}"


def _tier_line(t: Tier, scale: float) -> str:
    parts = [
        f"name: {t.name}",
        f"memoryCutGib: {_gib(t.memory_cut_bytes, scale)}",
        f"shape: {t.shape}",
        f"cpu: {t.cpu:g}",
    ]
    if t.capacity_type != SPOT:
        parts.append(f"capacityType: {t.capacity_type}")
    if t.exclusive:
        parts.append("exclusive: true")
    elif t.pods_per_node is not None:
        parts.append(f"podsPerNode: {t.pods_per_node}")
    return "{" + ", ".join(parts) + "}"


def chart_values(placement: Placement, memory_scale: float = 1.0, with_catalog: bool = False) -> str:
    """The chart values (charts/catchup-assets/values.yaml) for this ladder, in production GiB.

    `with_catalog` adds the catalog the shapes come from (needed unless it is the default one)."""
    lines = ["tiers:"] + [f"  - {_tier_line(t, memory_scale)}" for t in placement.tiers.ladder]
    lines.append(f"noProfileTier: {_tier_line(placement.tiers.no_profile, memory_scale)}")
    lines.append(f"unprofiledTier: {_tier_line(placement.tiers.unprofiled, memory_scale)}")
    if with_catalog:
        lines.append("catalog:")
        for s in placement.catalog.shapes:
            lines.append(
                f"  - {{name: {s.name}, memoryGib: {_gib(s.memory_bytes, memory_scale)}, cpu: {s.cpu:g}, "
                f"onDemandHourly: {s.on_demand_hourly:g}, spotHourly: {s.spot_hourly:g}, "
                f"allocatableMemoryGib: {_gib(s.allocatable_memory_bytes, memory_scale)}, "
                f"allocatableCpu: {s.allocatable_cpu:g}}}"
            )
        lines.append(f"catalogSource: {placement.catalog.source!r}")
    return "\n".join(lines) + "\n"


def ladder_text(placement: Placement, memory_scale: float = 1.0) -> str:
    """A ladder in one line: each tier's cut and node, e.g. `2 GiB c6i.8xlarge | 48 GiB r6i.8xlarge`."""
    return " | ".join(
        f"{_gib(t.memory_cut_bytes, memory_scale)} GiB {placement.shape_of(t.name).name}"
        for t in placement.tiers.ladder
    )


def comparison_rows(named: Sequence[tuple[str, Placement, MissionCost, Forecast]], memory_scale: float = 1.0):
    """One row per ladder: the ladder, ranges per tier, cost, flat cost, their ratio, predicted makespan."""
    return [
        {
            "ladder": name,
            "tiers": ladder_text(p, memory_scale),
            "ranges per tier": " ".join(
                f"{t.name}:{cost.by_tier[t.name].uses}" for t in p.tiers.all() if t.name in cost.by_tier
            ),
            "cost_usd": round(cost.dollars, 2),
            "flat_usd": round(cost.flat_dollars, 2),
            "ratio": None if cost.ratio is None else round(cost.ratio, 3),
            "makespan_h": round(f.makespan_seconds / 3600, 3),
            "bound_h": round(f.lower_bound_seconds / 3600, 3),
        }
        for name, p, cost, f in named
    ]

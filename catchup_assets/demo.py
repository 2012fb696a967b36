"""The demo: two missions over a simulated history on this machine.

The first runs with no profile (every range on the catch-all tier, OOMs climb
the ladder); the second is sized from the first's profile, longest first.
Memory is the production model scaled down (`memory_scale`), so the same
ladder, margins and headroom apply in MiB instead of GiB.
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from catchup_assets.backends.local import LocalBackend
from catchup_assets.dispatch import Status
from catchup_assets.mission import MissionConfig, build_profile, build_tier_map, prepare, run_mission
from catchup_assets.outcomes import RetryPolicy
from catchup_assets.ranges import CHECKPOINT_LEDGERS, MissionSpan
from catchup_assets.records import RecordStore
from catchup_assets.report import MissionSummary, side_by_side, summarize
from catchup_assets.sim.model import HISTORY_LEDGERS
from catchup_assets.sizing import SizingPolicy, Tiers, scaled_policy, scaled_tiers
from catchup_assets.storage import Store


@dataclass(frozen=True)
class DemoSettings:
    directory: Path
    ranges: int = 48
    parallelism: int = 8
    speed: float = 300_000.0  # simulated seconds per real second
    memory_scale: float = 1 / 200
    disruption_rate: float = 0.07
    seed: int = 0

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
    def storage_root(self) -> str:
        return str(self.directory / "storage")

    @property
    def work_dir(self) -> Path:
        return self.directory / "work"

    def span(self) -> MissionSpan:
        # The whole simulated history cut into `ranges` grid-aligned pieces.
        per = math.ceil(HISTORY_LEDGERS / self.ranges / CHECKPOINT_LEDGERS) * CHECKPOINT_LEDGERS
        return MissionSpan(1, per * self.ranges, ledgers_per_range=per, overlap=0)

    def tiers(self) -> Tiers:
        return scaled_tiers(Tiers(), self.memory_scale)

    def sizing(self) -> SizingPolicy:
        return scaled_policy(SizingPolicy(), self.memory_scale)

    def retry(self) -> RetryPolicy:
        return RetryPolicy(memory_cap_bytes=int(RetryPolicy().memory_cap_bytes * self.memory_scale))

    def sim_env(self) -> dict[str, str]:
        # Demo ranges are ~78x a production range, and so would be their disk
        # writes: keep ephemeral use measurable without writing gigabytes.
        return {
            "SIM_SPEED": repr(self.speed),
            "SIM_MEMORY_SCALE": repr(self.memory_scale),
            "SIM_DISK_SCALE": repr(self.memory_scale / 100),
            "SIM_SEED": str(self.seed),
        }

    def mission(self, name: str, previous_profile: str | None, order: str) -> MissionConfig:
        return MissionConfig(
            mission=name,
            span=self.span(),
            storage_root=self.storage_root,
            parallelism=self.parallelism,
            order=order,
            previous_profile=previous_profile,
            retry=self.retry(),
            sizing=self.sizing(),
            tiers=self.tiers(),
            poll_seconds=0.25,
            status_every=1,
            env=self.sim_env(),
        )

    def backend(self, mission: str) -> LocalBackend:
        return LocalBackend(
            self.work_dir, mission, disruption_rate=self.disruption_rate,
            disruption_seed=hash_seed(self.seed, mission),
            disruption_window=(0.3, 2.0),
        )


def hash_seed(seed: int, mission: str) -> int:
    """Each mission draws its own spot reclaims, the same ones on every run."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{mission}".encode()).digest()[:4], "big")


class ProgressBar:
    """Ranges done / in flight / condemned on one line (a line every few seconds off a terminal)."""

    def __init__(self, label: str, total: int, stream=sys.stderr):
        self.label, self.total, self.stream = label, total, stream
        self.tty = stream.isatty()
        self.last_print = 0.0

    def __call__(self, s: Status) -> None:
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
        elif now - self.last_print >= 5 or s.completed + s.condemned == self.total:
            self.stream.write(text + "\n")
            self.last_print = now

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def run_one(settings: DemoSettings, name: str, previous: str | None, order: str) -> tuple[MissionSummary, dict]:
    cfg = settings.mission(name, previous, order)
    prepared = prepare(cfg)
    bar = ProgressBar(name, len(prepared.ordered))
    started = time.monotonic()
    result = run_mission(prepared, settings.backend(name), on_status=bar)
    bar.close()
    wall = time.monotonic() - started
    out = build_profile(settings.storage_root, name)
    _, tier_map_url = build_tier_map(settings.storage_root, name, cfg.tiers, cfg.sizing, cfg.retry)
    records, done = RecordStore(Store(settings.storage_root), name).load()
    summary = summarize(
        name, [r for i, r in records.items() if i in done], cfg.tiers, len(prepared.ordered),
        len(result.condemned), time_scale=settings.speed,
    )
    summary = MissionSummary(**{**summary.__dict__, "wall_seconds": wall})
    return summary, {"result": result, "profile": out.url, "tier_map": tier_map_url}


def run_demo(settings: DemoSettings, out=sys.stdout) -> int:
    settings.directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    first, second = f"demo-{stamp}-a", f"demo-{stamp}-b"
    s1, r1 = run_one(settings, first, None, "tip-first")
    s2, r2 = run_one(settings, second, r1["profile"], "longest-first")
    print("\n" + side_by_side([s1, s2], settings.memory_scale), file=out)
    print(
        "\nmemory and node figures in production scale (the demo runs memory x "
        f"{settings.memory_scale:g} and time x {settings.speed:g}); wall time is real",
        file=out,
    )
    for name, r in ((first, r1), (second, r2)):
        print(f"\n{name}:", file=out)
        print(f"  profile   {r['profile']}", file=out)
        print(f"  tier map  {r['tier_map']}", file=out)
        for key, why in r["result"].condemned.items():
            print(f"  condemned {key}: {why}", file=out)
    failed = bool(r1["result"].condemned or r2["result"].condemned)
    return 1 if failed else 0

"""The code location of benchmarks/dagster_backfill.py: the project's definitions over a virtual backend.

Everything Dagster runs is the production code (assets, jobs, sensors, the
default executor, `range_catchup`'s dispatcher); only `CatchupResource.backend_for`
is replaced: attempts run on a `VirtualBackend` over the seed-shaped
`Workload` (catchup_assets/sim), with a clock that follows real time until
the dispatcher holds `live` attempts and then runs `speed` times faster, so a
run drains a 6-hour mission in a minute or two. The dispatcher keeps its own
system clock (poll, stall alerts), as in production.

The benchmark sets the settings in the environment before it starts the code
server; the run and step processes inherit them and validate them at load
(a bad value fails the load, naming the variable):

    CATCHUP_BENCH_RANGES   ranges of the workload (the mission's span must match)
    CATCHUP_BENCH_LIVE     attempts held at which the clock speeds up, and the milestone reported
    CATCHUP_BENCH_SPEED    simulated seconds per real second after that
    CATCHUP_BENCH_POLL     the dispatcher's poll, real seconds
    CATCHUP_BENCH_REPORT   a JSON-lines file the processes append milestones to (empty: none)
    CATCHUP_BENCH_PROFILE  a file for a cProfile of the step process from resource setup to `live` (empty: none)
"""

from __future__ import annotations

import cProfile
import json
import os
import sys
import time
from dataclasses import dataclass

import dagster as dg
import psutil
from pydantic import Field, model_validator

from catchup_assets.core.dispatch.ports import AttemptSpec, AttemptState
from catchup_assets.defs.location import definitions_for
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.resources.backend import mission_seed
from catchup_assets.sim.workload import Workload
from kubesim.virtual import FAILED, VirtualBackend

ENV = {
    "ranges": "CATCHUP_BENCH_RANGES",
    "live": "CATCHUP_BENCH_LIVE",
    "speed": "CATCHUP_BENCH_SPEED",
    "poll_seconds": "CATCHUP_BENCH_POLL",
    "report": "CATCHUP_BENCH_REPORT",
    "profile": "CATCHUP_BENCH_PROFILE",
    "condemn": "CATCHUP_BENCH_CONDEMN",
}
DEFAULTS = {
    "ranges": 4000,
    "live": 2000,
    "speed": 2000.0,
    "poll_seconds": 0.5,
    "report": "",
    "profile": "",
    "condemn": 0,
}


def note(report: str, event: str, **fields) -> None:
    """Append one milestone (wall time, pid) to the report file; a line is one write, so processes may share it."""
    if not report:
        return
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields}) + "\n"
    with open(report, "a") as f:
        f.write(line)


class PhasedClock:
    """Real (epoch) time until `switch()`, then `speed` times real time from there on; monotonic."""

    def __init__(self, speed: float):
        self.speed = speed
        self.switched_at: float | None = None
        self.backend: VirtualBackend | None = None  # VirtualBackend sets it

    def switch(self) -> None:
        if self.switched_at is None:
            self.switched_at = time.time()

    def time(self) -> float:
        now = time.time()
        if self.switched_at is None:
            return now
        return self.switched_at + (now - self.switched_at) * self.speed

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class ReportingBackend(VirtualBackend):
    """A VirtualBackend that notes its first submit and the submit at which it first holds `live` attempts."""

    live: int = 1
    report: str = ""
    reached: bool = False
    released: int = 0
    failing: frozenset[str] = frozenset()  # ranges whose every attempt fails when it would have ended

    def submit(self, spec: AttemptSpec) -> None:
        super().submit(spec)
        if spec.range_key in self.failing:
            # At its end, between the others' successes: a lone failure, not a burst that trips the breaker.
            a = self.attempts[spec.attempt_id]
            # Classified `failed`, its range condemned once the failed budget is spent.
            a.observation, a.progress_after = FAILED, 0.0
        if self.submits == 1:
            note(self.report, "first_submit")
        if not self.reached and len(self.attempts) >= self.live:
            self.reached = True
            self.clock.switch()
            note(self.report, "live", held=len(self.attempts), submits=self.submits)
            _stop_profile()

    def release(self, state: AttemptState) -> None:
        super().release(state)
        self.released += 1


_profiler: cProfile.Profile | None = None
_profile_path = ""


def _stop_profile() -> None:
    global _profiler
    if _profiler is not None:
        _profiler.disable()
        _profiler.dump_stats(_profile_path)
        _profiler = None


class VirtualCatchupResource(CatchupResource):
    """CatchupResource whose attempts run on a VirtualBackend over Workload(ranges)."""

    ranges: int = Field(default=DEFAULTS["ranges"], ge=1)
    live: int = Field(default=DEFAULTS["live"], ge=1)
    speed: float = Field(default=DEFAULTS["speed"], gt=0)
    report: str = ""
    profile: str = ""
    condemn: int = Field(default=DEFAULTS["condemn"], ge=0)

    @model_validator(mode="after")
    def _check_bench(self):
        if self.live > self.ranges:
            raise ValueError(f"live ({self.live}) must be <= ranges ({self.ranges})")
        for name in ("report", "profile"):
            path = getattr(self, name)
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ValueError(f"{name}: directory of {path!r} does not exist")
        return self

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        global _profiler, _profile_path
        note(self.report, "resource_setup")
        if self.profile and _profiler is None:
            _profile_path = self.profile
            _profiler = cProfile.Profile()
            _profiler.enable()

    def backend_for(self, mission: str, disruption_seed: int | None = None, sleeper=None) -> ReportingBackend:
        # `sleeper`: the run's clock, for a real backend's API waits; the virtual backend waits on none.
        note(self.report, "backend_for", mission=mission)
        seed = disruption_seed if disruption_seed is not None else mission_seed(self.sim_seed, mission)
        workload = Workload(ranges=self.ranges)
        return ReportingBackend(
            workload,
            PhasedClock(self.speed),
            placement=self.placement(),
            mission_seed=seed,
            live=self.live,
            report=self.report,
            failing=failing_ranges(workload, self.condemn),
        )


def failing_ranges(workload: Workload, n: int) -> frozenset[str]:
    """`n` ranges spread evenly over the mission (some among the first dispatched, longest first)."""
    keys = sorted(r.key for r in workload)
    return frozenset(keys[i * len(keys) // n] for i in range(n)) if n else frozenset()


def settings_from_env(environ=os.environ) -> dict:
    """The resource's benchmark fields from the environment (defaults where unset)."""
    out: dict = {}
    for field, var in ENV.items():
        raw = environ.get(var, "")
        if raw == "":
            out[field] = DEFAULTS[field]
            continue
        kind = type(DEFAULTS[field])
        try:
            out[field] = kind(raw)
        except ValueError:
            raise ValueError(f"{var}={raw!r}: not {'an integer' if kind is int else 'a number'}") from None
    return out


def build_defs(**settings) -> dg.Definitions:
    """The project's definitions (as catchup_assets.defs.definitions) with a VirtualCatchupResource."""
    return definitions_for(VirtualCatchupResource(**settings))


_settings = settings_from_env()
defs = build_defs(**_settings)  # validated here: a bad setting fails the code location's load
note(_settings["report"], "location_loaded", created=psutil.Process().create_time(), argv=" ".join(sys.argv[:4])[:200])

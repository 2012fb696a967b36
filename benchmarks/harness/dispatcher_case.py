"""One case of benchmarks/dispatcher_cost.py: a mission through the real Dispatcher on one backend's code path,
in this process or in a fresh interpreter, and what it measured (`Measured`: plain data, so it crosses the
process boundary)."""

from __future__ import annotations

import multiprocessing
import traceback
from dataclasses import dataclass, field

from benchmarks.harness.as_installed import as_installed
from benchmarks.harness.meter import PassRow, Trace
from benchmarks.harness.sim_cluster import VariedAttempts
from catchup_assets.core.dispatch.results import RangeStatus


@dataclass(frozen=True)
class Case:
    path: str  # "kubernetes" | "local"
    in_flight: int
    ranges_per_slot: float = 1.5
    supervisor: str = ""  # local: "real" | "standin"
    attempts: VariedAttempts = VariedAttempts()  # kubernetes: virtual durations
    shortest: int = 20  # local stand-in: wall seconds
    longest: int = 60
    sim_speed: float = 16.0  # local real: the simulated core's speed-up
    poll_seconds: float = 1.0  # local: DispatchConfig's default (Kubernetes: virtual, K8sMission's)
    profile: bool = False  # cProfile one steady pass
    trace: bool = False  # tracemalloc over another

    @property
    def label(self) -> str:
        return "kubernetes" if self.path == "kubernetes" else f"local, {self.supervisor} supervisors"


@dataclass
class Measured:
    """One case's figures, plain data so they cross the process boundary."""

    case: Case
    attempts: int
    passes: list[PassRow]
    steady: list[int]
    cpu: dict[str, float]
    events: dict[str, int]
    wall: float
    run_cpu: float
    setup_rss: int
    all_done: bool
    leftovers: int  # Jobs left on the server / supervisors left alive
    other_cores: float  # what the rest of the machine used meanwhile, in cores
    profile: str | None = None
    trace: Trace | None = None
    extra: dict = field(default_factory=dict)

    def steady_rows(self) -> list[PassRow]:
        """Steady passes neither profiled nor traced."""
        return [self.passes[i] for i in self.steady if not self.passes[i].instrumented]

    def untraced(self) -> list[PassRow]:
        traced = next((i for i, p in enumerate(self.passes) if p.instrumented == "traced"), len(self.passes))
        return self.passes[:traced]

    @property
    def cap_rss(self) -> int:
        """Most RSS after a steady pass before the traced one (or after any pass, if none was steady)."""
        before, steady = self.untraced(), set(self.steady)
        return max([p.rss for i, p in enumerate(before) if i in steady] or [p.rss for p in before])

    @property
    def high_water(self) -> int:
        # ru_maxrss and /proc's RSS are counted apart (per-thread batches): either may lead by ~100 KiB.
        return max(self.setup_rss, *(max(p.max_rss, p.rss) for p in self.untraced()))


def measure(case: Case) -> Measured:
    """Run one case in this process."""
    _warm_up(case.path)
    if case.path == "kubernetes":
        from benchmarks.harness.k8s_mission import K8sMission, run_k8s_mission

        run = run_k8s_mission(
            K8sMission(
                case.in_flight,
                ranges_per_slot=case.ranges_per_slot,
                attempts=case.attempts,
                profile_steady_pass=case.profile,
                trace_steady_pass=case.trace,
            )
        )
        extra = {
            "nodes": run.nodes,
            "summaries": run.requests.get(("get", "nodes/stats"), 0),
            "polled reads": run.log_reads["doomed"],  # only pods about to go are read while there
            "final reads": run.log_reads["final"],
        }
        leftovers = run.jobs_left
    else:
        from benchmarks.harness.local_mission import LocalMission, run_local_mission

        run = run_local_mission(
            LocalMission(
                case.in_flight,
                ranges_per_slot=case.ranges_per_slot,
                supervisor=case.supervisor,
                shortest=case.shortest,
                longest=case.longest,
                sim_speed=case.sim_speed,
                poll_seconds=case.poll_seconds,
                profile_steady_pass=case.profile,
                trace_steady_pass=case.trace,
            )
        )
        extra, leftovers = {}, len(run.left_alive)
    done = all(r.status is RangeStatus.DONE for r in run.result.results.values())
    meter = run.meter
    return Measured(
        case,
        run.attempts,
        meter.passes,
        meter.steady_indices(),
        dict(meter.cpu),
        dict(meter.events),
        run.wall,
        run.run_cpu,
        run.setup_rss,
        done,
        leftovers,
        run.other_cores,
        meter.profile,
        meter.trace,
        extra,
    )


def _warm_up(path: str) -> None:
    """Import what the first pass would import lazily, so the baseline holds it and no attempt pays for it."""
    from catchup_assets.core.values.attempt_record import AttemptRecord
    from catchup_assets.store.records import encode

    encode(AttemptRecord("m1", "0000000001-0000016000", 1))  # pyarrow's first table
    if path == "kubernetes":
        from benchmarks.harness.k8s_mission import SETTINGS
        from catchup_assets.backends.kubernetes.manifests import job_manifest
        from catchup_assets.core.dispatch.ports import AttemptSpec
        from catchup_assets.core.size.sizing import Tiers

        spec = AttemptSpec("m1", "0000000001-0000016000", 1, 16000, 16320, 1 << 30, 1 << 30, "nebula")
        job_manifest(spec, Tiers().by_name("nebula"), False, SETTINGS)
        _import_models_read()


def _import_models_read() -> None:
    """The client's models a Job or pod holds, which the backend's views import as they first read them
    (backends/kubernetes/lean_import.py): 142 of them, ~3.8 MiB, of which a run reads ~54 (~1.4 MiB).
    All of them here, so the baseline holds them (a little over what production loads) and no attempt pays."""
    import re

    from kubernetes.client import models

    todo, seen = ["V1Job", "V1Pod"], set()
    while todo:
        name = todo.pop()
        if name in seen or not hasattr(models, name):
            continue
        seen.add(name)
        todo += [t for typ in getattr(models, name).openapi_types.values() for t in re.findall(r"\b[A-Z]\w*", typ)]


def _child(conn, case: Case) -> None:
    as_installed()  # as a production install: no pandas (benchmarks/harness/as_installed.py)
    try:
        conn.send(("ok", measure(case)))
    except BaseException:  # noqa: BLE001 - the parent reports it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def measure_in_fresh_process(case: Case) -> Measured:
    """Run one case in a new interpreter: its RSS then holds only this case's path."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, case), name=f"case-{case.path}-{case.in_flight}")
    proc.start()
    child.close()
    try:
        status, value = parent.recv()
    finally:
        proc.join()
    if status != "ok":
        raise RuntimeError(f"case {case} failed:\n{value}")
    return value

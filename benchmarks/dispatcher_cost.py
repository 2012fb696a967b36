"""Dispatcher cost: CPU per pass and per attempt, memory per in-flight attempt, on both backends' code paths.

Each case is one mission through the real Dispatcher in a fresh interpreter,
so the process's CPU and RSS are the dispatcher's and hold only what its path
imports: the Kubernetes path against the simulated cluster (a child process,
virtual time), the local path with real supervisors at the most this machine
holds, and with stand-in supervisors at 2000 (`local_mission`).
Target: <= 150 MiB + 50 KiB per in-flight attempt for the dispatcher at 2000 in flight.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.as_installed import as_installed, bytecode
from benchmarks.harness.meter import PassRow, Trace
from benchmarks.harness.report import write_result
from benchmarks.harness.sim_cluster import VariedAttempts
from catchup_assets.core.dispatch.results import RangeStatus

MiB, KiB = 1024**2, 1024
FIXED_ALLOWANCE, PER_ATTEMPT_ALLOWANCE = 150 * MiB, 50 * KiB


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
    from catchup_assets.core.dispatch.record import AttemptRecord
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


def warm_bytecode(paths: list[str]) -> None:
    """Compile, as the image's build does, what each path's case imports: its small cases, not measured.

    In a subprocess: multiprocessing passes `-B` to its children when this interpreter has it
    (PYTHONDONTWRITEBYTECODE), so a spawned child would read bytecode but write none."""
    code = (
        "from benchmarks.dispatcher_cost import cases, measure\n"
        f"for case in cases(smoke=True):\n    if case.path in {paths!r} and case.supervisor != 'real':\n"
        "        measure(case)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=Path(__file__).parents[1])


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


# -- the report ------------------------------------------------------------------


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def _per(n: float, d: float) -> float:
    return n / d if d else math.nan


def read_per_attempt(m: Measured) -> tuple[float, int]:
    """The per-pass read's CPU per in-flight attempt (s): median over passes that began at least a quarter full.

    Normalised by the pass's own in-flight count, so the ramp-down counts too:
    the read is linear in what is in flight, whatever the pass does besides.
    """
    cap = m.case.in_flight
    samples = sorted(
        p.reconcile_read / m.passes[i - 1].in_flight
        for i, p in enumerate(m.passes)
        if i >= 2 and not p.instrumented and m.passes[i - 1].in_flight >= cap / 4
    )
    return (samples[len(samples) // 2] if samples else math.nan), len(samples)


def event_cpu(m: Measured) -> float:
    """CPU of what happens once per attempt (or per pod about to go), whatever the cadence (s, whole run)."""
    return sum(m.cpu.get(k, 0.0) for k in ("submit", "finish", "flush", "log polls"))


def cpu_table(results: list[Measured]) -> list[list[object]]:
    rows = []
    for m in results:
        per, n = read_per_attempt(m)
        steady = m.steady_rows()
        rows.append(
            [
                m.case.label,
                m.case.in_flight,
                m.attempts,
                len(m.passes),
                f"{1000 * per:.2f} ({n})",
                per * m.case.in_flight,
                f"{_mean(p.cpu for p in steady):.3g} ({len(steady)})",
                1000 * event_cpu(m) / m.attempts,
                1000 * m.run_cpu / m.attempts,
                m.wall,
                m.other_cores,
            ]
        )
    return rows


def activity_table(results: list[Measured]) -> list[list[object]]:
    rows = []
    for m in results:
        c, e, x = m.cpu, m.events, m.extra
        k8s = m.case.path == "kubernetes"
        rows.append(
            [
                m.case.label,
                m.case.in_flight,
                1000 * _per(c.get("submit", 0), e.get("submit", 0)),
                1000 * _per(c.get("finish", 0), e.get("finish", 0)),
                1000 * _per(c.get("flush", 0), e.get("flush", 0)),
                _per(e.get("flush", 0), m.attempts),
                1000 * _per(c.get("log polls", 0), x["polled reads"]) if k8s and x["polled reads"] else "-",
                1000 * _per(c.get("kubelet summaries", 0), x["summaries"]) if k8s else "-",
            ]
        )
    return rows


def allowance(n: int) -> int:
    return FIXED_ALLOWANCE + PER_ATTEMPT_ALLOWANCE * n


def memory_table(results: list[Measured]) -> list[list[object]]:
    rows = []
    for m in results:
        n = m.case.in_flight
        rows.append(
            [
                m.case.label,
                n,
                m.setup_rss / MiB,
                m.cap_rss / MiB,
                m.high_water / MiB,
                (m.cap_rss - m.setup_rss) / n / KiB,
                allowance(n) / MiB,
                "yes" if m.high_water <= allowance(n) else f"no, +{(m.high_water - allowance(n)) / MiB:.0f} MiB",
                m.trace.peak / MiB if m.trace else "-",
                m.trace.kept / MiB if m.trace else "-",
            ]
        )
    return rows


def slope(results: list[Measured], label: str) -> float | None:
    """RSS per in-flight attempt between the smallest and the largest case of one path (KiB)."""
    same = sorted((m for m in results if m.case.label == label), key=lambda m: m.case.in_flight)
    if len(same) < 2 or same[0].case.in_flight == same[-1].case.in_flight:
        return None
    lo, hi = same[0], same[-1]
    return (hi.cap_rss - lo.cap_rss) / (hi.case.in_flight - lo.case.in_flight) / KiB


def at_production_cadence(m: Measured, poll: float = 1.0) -> str:
    """What a pass would cost with poll_seconds 1 s and attempts of hours, from this case's unit costs."""
    n, c, e = m.case.in_flight, m.cpu, m.events
    read = read_per_attempt(m)[0] * n
    mean_seconds = (m.case.attempts.shortest + m.case.attempts.longest) / 2
    per_second = {  # CPU seconds per second of whatever the pass interval
        "peak flushes": n / 60 * _per(c.get("flush", 0), e.get("flush", 0)),  # every live attempt once a minute
        "starts and ends": n / mean_seconds * _per(c.get("submit", 0) + c.get("finish", 0), e.get("finish", 0)),
    }
    if m.case.path == "kubernetes":
        per_second[f"kubelet summaries ({m.extra['nodes']} nodes)"] = (
            m.extra["nodes"] / 10 * _per(c.get("kubelet summaries", 0), m.extra["summaries"])
        )
    busy = sum(per_second.values())
    # A pass of length T every C seconds: T = read + busy * C and C = T + poll.
    cycle = (read + poll) / (1 - busy) if busy < 1 else math.inf
    return (
        f"{m.case.label} at {n} in flight, at a production cadence (poll_seconds {poll:g} s, attempts of "
        f"{mean_seconds:.0f} s on average): the read takes {read:.2f} s per pass; per second of running besides, "
        + ", ".join(f"{k} {v:.3f} s" for k, v in per_second.items())
        + f". So a pass every ~{cycle:.1f} s, the dispatcher busy {(cycle - poll) / cycle:.0%} of one core."
    )


def notes(results: list[Measured], wall: float) -> str:
    lines = []
    for m in results:
        if m.case.in_flight >= 2000:
            verdict = "met" if m.high_water <= allowance(m.case.in_flight) else "NOT met"
            lines.append(
                f"Target at {m.case.in_flight} in flight, {m.case.label}: high-water RSS "
                f"{m.high_water / MiB:.0f} MiB against {allowance(m.case.in_flight) / MiB:.0f} MiB: {verdict} "
                f"(baseline {m.setup_rss / MiB:.0f} MiB against 150; "
                f"{(m.cap_rss - m.setup_rss) / m.case.in_flight / KiB:.0f} KiB per in-flight attempt against 50)."
            )
    for label in sorted({m.case.label for m in results}):
        s = slope(results, label)
        if s is not None:
            lines.append(f"RSS per in-flight attempt between the smallest and the largest {label} case: {s:.1f} KiB.")
    for m in results:
        if m.case.in_flight >= 2000:
            lines.append(at_production_cadence(m))
    real = [m for m in results if m.case.supervisor == "real"]
    standin = {m.case.in_flight: m for m in results if m.case.supervisor == "standin"}
    for m in real:
        per = read_per_attempt(m)[0]
        text = (
            f"Local with real supervisors at {m.case.in_flight} in flight, about the most this machine holds: each "
            "attempt is two Python processes (supervisor, simulated core), ~19 MiB unique (~35 MiB RSS) "
            "measured apart, and its supervisor samples at 0.2 s for ~0.3% of a core, so 2000 would need "
            f"~37 GiB and ~6 cores. The read costs {1000 * per:.2f} ms per in-flight attempt per pass"
        )
        twin = standin.get(m.case.in_flight)
        if twin is not None:
            text += (
                f", {1000 * read_per_attempt(twin)[0]:.2f} ms with stand-ins at the same count; events "
                f"{1000 * event_cpu(m) / m.attempts:.1f} ms per attempt real, "
                f"{1000 * event_cpu(twin) / twin.attempts:.1f} ms stand-in"
            )
        text += f". Linear in what is in flight, a pass over 2000 real ones would read for ~{per * 2000:.2f} s"
        big = standin.get(max(standin)) if standin else None
        if big is not None and big.case.in_flight >= 2000:
            text += (
                f" (stand-ins measured at {big.case.in_flight}: {read_per_attempt(big)[0] * big.case.in_flight:.2f} s)"
            )
        lines.append(text + ".")
    lines.append(
        f"Wall time of the whole benchmark: {wall:.0f} s; per case: "
        + ", ".join(f"{m.case.label} at {m.case.in_flight}: {m.wall:.0f} s" for m in results)
        + f'. {os.cpu_count()} cores; "other load" is what the rest of the machine used during a case '
        "(everything busy minus the dispatcher, the cluster and the supervisors): on this 2-core VM "
        "other work inflates CPU times too, not only wall times."
    )
    lines += ["", EXPLAIN]
    for m in results:
        if m.profile:
            lines += ["", f"{m.case.label} at {m.case.in_flight} in flight: {m.profile}"]
    return "\n".join(lines)


EXPLAIN = """What each figure is. CPU is `time.process_time()` of the dispatcher's process: every thread of it
(the backend's log-poll threads too), nothing of the simulated cluster (a child process) or of the
supervisors (processes of their own).

The read is what every pass does whatever else happens: Kubernetes, `observe()` without the log
reads of pods about to go and the kubelet summaries nested in it (the two LISTs, their JSON read through model views,
one state per Job); local, `observe()` (per attempt directory: status, peaks, supervisor and worker files,
a liveness check of the supervisor's pid). Per in-flight attempt it is the median over passes that
began at least a quarter full, each divided by its own in-flight count (passes counted in brackets); "at
the cap" multiplies it back. A steady pass began with every slot taken and ranges queued; "as run" is
the mean of those passes' CPU (neither the profiled nor the traced pass), and it holds whatever landed
in the pass: starts, ends, flushes, log reads. Event CPU per attempt is submit + finish + peak flushes
+ log reads of pods about to go over the attempts; CPU per attempt, whole run, is every pass and the closing
snapshot over the attempts, so it holds the read too, as often as the run read.

Per event: submit (sizing, the durable record, the Job and PVC or the supervisor's directory and
process), finish (final log read and archive, record, done mark, release, freeing the range's PVC or
data directory), a peak flush (the in-flight record rewritten with its peaks, at most every 60 s per
live attempt), a log read of a pod about to go (pool threads; none when nothing is reclaimed), a
kubelet summary (one node's /stats/summary).

Memory is the RSS of the dispatcher's process: baseline before the first pass (interpreter, imports:
the parts of the Kubernetes client the backend uses ~23 MiB with urllib3, ~86 MiB whole before
backends/kubernetes/lean_import.py; pyarrow with numpy ~38 MiB; pandas, which pyarrow would import on
its first table, is not installed in production and refused in the measured process; modules read
from bytecode compiled beforehand, as the image's are, unless --sources; `benchmarks.start_memory`
breaks it down), the most after a
steady pass ("at the cap"), and the high-water mark (ru_maxrss, the passes' transient peaks included).
Per in-flight attempt: (RSS at the cap - baseline) / in flight.
tracemalloc watched one steady pass only (it triples the cost of what it watches): its peak is what
that pass allocated at most at once (on Kubernetes the two LIST bodies, decoded), "kept" what it
allocated and still held after it; no RSS after the traced pass is used above.

The Kubernetes runs take passes 1800 virtual seconds apart (attempts of 600-20,000 s), so a pass there
does the work of ~1800 production passes (poll_seconds 1 s): many starts and ends, a peak flush of
every live attempt. No running pod's log is read: the worker keeps it on the range's volume. The
local runs take real time and the production poll (1 s) but attempts of 20-60 s (stand-ins) or
~35-55 s (the simulated core at 16x), so they start and end far more often per pass than hours-long
ranges would."""


def cases(smoke: bool) -> list[Case]:
    if smoke:
        short = VariedAttempts(600.0, 6000.0)
        return [
            Case("kubernetes", 5, 3.0, attempts=short, profile=True, trace=True),
            Case("local", 2, 1.5, "real", sim_speed=2000.0, poll_seconds=0.2),
            Case("local", 3, 2.0, "standin", shortest=1, longest=1, poll_seconds=0.2, profile=True),
        ]
    # Local memory is a few KiB per attempt: no tracemalloc pass there (too few steady passes to spare one).
    return [
        Case("kubernetes", 100),
        Case("kubernetes", 2000, profile=True, trace=True),
        Case("local", 200, 1.5, "real"),
        Case("local", 200, 1.5, "standin"),
        Case("local", 2000, 2.0, "standin", profile=True),
    ]  # 2x: its first pass alone outlasts short attempts


def main(argv: list[str] | None = None) -> list[Measured]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dispatcher_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--paths", nargs="+", choices=["kubernetes", "local"], default=["kubernetes", "local"])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, in this process, to check the benchmark still runs"
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    parser.add_argument(
        "--sources",
        action="store_true",
        help="children compile every module's source, as this dev environment does (default: bytecode, as the image)",
    )
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    results = []
    with bytecode(compiled=not args.sources):
        if not args.smoke and not args.sources:
            warm_bytecode(args.paths)
        for case in cases(args.smoke):
            if case.path not in args.paths:
                continue
            # Smoke runs stay in this process: seconds of imports per fresh interpreter would dominate them.
            results.append(measure(case) if args.smoke else measure_in_fresh_process(case))
            m = results[-1]
            print(
                f"{m.case.label} at {m.case.in_flight}: {m.attempts} attempts, {len(m.passes)} passes, {m.wall:.0f} s",
                flush=True,
            )
    wall = time.perf_counter() - t0
    tables = [
        (
            "CPU of the dispatcher's process",
            [
                "path",
                "in flight",
                "attempts",
                "passes",
                "read ms per in-flight attempt (passes)",
                "read s per pass at the cap",
                "CPU s per steady pass as run (passes)",
                "event CPU ms per attempt",
                "CPU ms per attempt, whole run",
                "wall s",
                "other load, cores",
            ],
            cpu_table(results),
        ),
        (
            "CPU per event (whole run)",
            [
                "path",
                "in flight",
                "submit ms",
                "finish ms",
                "peak flush ms per write",
                "peak flushes per attempt",
                "log poll ms per read",
                "kubelet summary ms per node",
            ],
            activity_table(results),
        ),
        (
            "Memory of the dispatcher's process",
            [
                "path",
                "in flight",
                "baseline RSS MiB",
                "RSS at the cap MiB",
                "high-water RSS MiB",
                "KiB per in-flight attempt",
                "allowance MiB (150 + 50 KiB each)",
                "within",
                "one pass: tracemalloc peak MiB",
                "one pass: kept MiB",
            ],
            memory_table(results),
        ),
    ]
    for m in results:
        if m.trace:
            tables.append(
                (
                    f"What one steady pass kept, by file ({m.case.label}, {m.trace.in_flight} in flight, tracemalloc)",
                    ["file", "KiB"],
                    [[f, b / KiB] for f, b in m.trace.sites],
                )
            )
    write_result(
        "dispatcher_cost",
        "Dispatcher cost: CPU and memory per pass and per attempt",
        tables,
        notes(results, wall),
        args.out,
    )
    return results


if __name__ == "__main__":
    main()

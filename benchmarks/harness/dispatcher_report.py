"""The report of benchmarks/dispatcher_cost.py: CPU per pass, per attempt and per event, memory against the
allowance, and the notes on what each figure is."""

from __future__ import annotations

import math
import os

from benchmarks.harness.dispatcher_case import Measured

MiB, KiB = 1024**2, 1024


FIXED_ALLOWANCE, PER_ATTEMPT_ALLOWANCE = 150 * MiB, 50 * KiB


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

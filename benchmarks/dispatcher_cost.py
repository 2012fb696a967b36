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
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness.as_installed import bytecode
from benchmarks.harness.dispatcher_case import Case, Measured, measure, measure_in_fresh_process
from benchmarks.harness.dispatcher_report import KiB, activity_table, cpu_table, memory_table, notes
from benchmarks.harness.report import write_result
from benchmarks.harness.sim_cluster import VariedAttempts


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

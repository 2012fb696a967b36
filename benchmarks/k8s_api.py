"""Kubernetes API requests per attempt and per reconcile pass, at 100 and at 2000 attempts in flight.

A mission of `ranges_per_slot x in-flight` ranges runs through the real
Dispatcher and KubernetesBackend against the simulated API server, which
counts every request by verb and resource (`sim_cluster`, `k8s_mission`).
Target: requests per attempt flat and <= 6 from 100 to 2000 in flight.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from benchmarks.harness.k8s_mission import K8sMission, K8sMissionRun, run_k8s_mission
from benchmarks.harness.report import write_result
from benchmarks.harness.sim_cluster import VariedAttempts, request_delta, split_requests

TARGET_PER_ATTEMPT = 6.0
FLAT_WITHIN = 0.05  # "flat": per-attempt figures within 5% of each other


def per_attempt(run: K8sMissionRun) -> float:
    """Requests per attempt, per-pass LISTs and per-node reads left out (they do not follow attempts)."""
    return split_requests(run.requests)[2] / run.attempts


def steady_pass_requests(run: K8sMissionRun) -> list[dict[tuple[str, str], int]]:
    """Each steady pass's own requests (a pass that began with every slot taken, work queued)."""
    series = run.after_pass
    return [request_delta(series[i], series[i - 1]) for i in run.meter.steady_indices() if 0 < i < len(series)]


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def tables(runs: list[K8sMissionRun]) -> list[tuple[str, list[str], list[list[object]]]]:
    attempts_rows = []
    for r in runs:
        lists, stats, rest = split_requests(r.requests)
        attempts_rows.append(
            [
                r.mission.parallelism,
                r.mission.ranges,
                r.attempts,
                r.passes,
                sum(r.requests.values()),
                per_attempt(r),
                sum(r.log_reads.values()) / r.attempts,
                sum(r.requests.values()) / r.attempts,
                lists / r.passes,
                stats / r.passes,
            ]
        )
    keys = sorted({k for r in runs for k in r.requests})
    by_kind = [[f"{verb} {res}", *[r.requests.get((verb, res), 0) / r.attempts for r in runs]] for verb, res in keys]
    by_kind.append(["log reads: a pod about to go (observe)", *[r.log_reads["doomed"] / r.attempts for r in runs]])
    by_kind.append(["log reads: final (collect)", *[r.log_reads["final"] / r.attempts for r in runs]])
    pass_rows = []
    for r in runs:
        steady = steady_pass_requests(r)
        split = [split_requests(d) for d in steady]
        logs = [d.get(("get", "pods/log"), 0) for d in steady]
        rows = [r.meter.passes[i] for i in r.meter.steady_indices()]
        pass_rows.append(
            [
                r.mission.parallelism,
                len(steady),
                _mean(s[0] for s in split),
                _mean(s[1] for s in split),
                r.nodes,
                _mean(logs),
                _mean(s[2] - n for s, n in zip(split, logs, strict=True)),
                _mean(sum(d.values()) for d in steady),
                _mean(p.finished for p in rows),
                _mean(p.wall for p in rows),
            ]
        )
    return [
        (
            "Requests per attempt (every attempt of the mission)",
            [
                "in flight",
                "ranges",
                "attempts",
                "passes",
                "requests",
                "per attempt (no LISTs, no per-node reads)",
                "log reads per attempt",
                "per attempt, everything",
                "LISTs per pass",
                "per-node reads per pass",
            ],
            attempts_rows,
        ),
        (
            "Per attempt, by verb and resource",
            ["request", *[f"{r.mission.parallelism} in flight" for r in runs]],
            by_kind,
        ),
        (
            "Per steady pass (began with every slot taken and ranges queued)",
            [
                "in flight",
                "steady passes",
                "LISTs",
                "per-node reads",
                "nodes",
                "log reads",
                "creates + deletes",
                "all requests",
                "attempts finished",
                "dispatcher wall s",
            ],
            pass_rows,
        ),
    ]


def verdict(runs: list[K8sMissionRun]) -> str:
    figures = [per_attempt(r) for r in runs]
    spread = (max(figures) - min(figures)) / min(figures)
    flat = spread <= FLAT_WITHIN
    lines = [
        f"Target (requests per attempt flat and <= {TARGET_PER_ATTEMPT:g}): per attempt "
        + ", ".join(f"{f:.2f} at {r.mission.parallelism}" for f, r in zip(figures, runs, strict=True))
        + f"; spread {spread:.1%} ({'flat' if flat else 'NOT flat'}, tolerance {FLAT_WITHIN:.0%})."
    ]
    over = max(figures) - TARGET_PER_ATTEMPT
    if over > 0:
        lines.append(
            f"Not met: {over:.2f} requests per attempt over the target ({max(figures) / TARGET_PER_ATTEMPT:.2f}x)."
        )
    elif flat:
        lines.append("Met.")
    else:
        lines.append("Not met: within the figure, but not flat.")
    return " ".join(lines)


def notes(runs: list[K8sMissionRun], wall: float) -> str:
    m = runs[0].mission
    a = m.attempts
    lines = [
        verdict(runs),
        "",
        "What runs: the real `Dispatcher` and `KubernetesBackend` (official client over HTTP) against the simulated "
        "API server and kubelet in a child process, in virtual time: the dispatcher's `sleep` moves the cluster "
        f"forward. Every attempt succeeds; its duration is uniform in [{a.shortest:.0f}, {a.longest:.0f}] s "
        f"(fixed by range and attempt), it prints 5 log lines. Passes are {m.poll_seconds:.0f} virtual seconds apart, "
        f"stats_interval {m.stats_interval:.0f} s is the backend's default, "
        f"{m.pods_per_node} pods fit a node (plus one spare node). In-flight peak records are not written here "
        "(storage writes, no API request; their cost is in dispatcher_cost).",
        "",
        "How to read it: the Job create and delete, the PVC create and delete and the final log read (collect) "
        "happen once per attempt whatever the number in flight, so their sum is flat. No running pod's log is "
        "read (the worker keeps its log on the range's volume; only a pod about to go is read at once, and none "
        "is here), so nothing grows with an attempt's length either. Per pass there are 2 LISTs (Jobs, pods; "
        "one page each, no limit) whatever the number in flight, and one kubelet summary per node with a "
        "running pod of the mission at most every stats_interval, read from the node's kubelet (the API server "
        "never sees it), plus one GET of each such Node, whose kubelet address is then kept: together the "
        "per-node reads. At a production cadence (poll_seconds 1 s) that is 2 LISTs per second and "
        "nodes / stats_interval summaries per second (2000 pods on 2000/2 nebula nodes: ~100 per second, "
        "spread over the kubelets), so the per-pass figures here, taken every "
        f"{m.poll_seconds:.0f} virtual seconds, are per pass, not per attempt.",
        "",
        f"Wall time of the whole benchmark: {wall:.0f} s; per run: "
        + ", ".join(f"{r.wall:.0f} s at {r.mission.parallelism}" for r in runs)
        + ". "
        "Leftover Jobs after each run: " + ", ".join(str(r.jobs_left) for r in runs) + ". "
        "Other load on the machine meanwhile (everything busy minus the dispatcher and the cluster): "
        + ", ".join(f"{r.other_cores:.2f} cores at {r.mission.parallelism}" for r in runs)
        + ".",
    ]
    profiled = [r for r in runs if r.meter.profile]
    if profiled:
        lines += [
            "",
            "What a pass costs (dispatcher process, the cluster is in another one): " + profiled[-1].meter.profile,
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[K8sMissionRun]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.k8s_api", description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[100, 2000])
    parser.add_argument("--ranges-per-slot", type=float, default=1.5)
    parser.add_argument("--poll-seconds", type=float, default=1800.0, help="virtual seconds between passes")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the benchmark still runs")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    in_flight, per_slot, attempts = args.in_flight, args.ranges_per_slot, VariedAttempts()
    if args.smoke:
        in_flight, per_slot, attempts = [5], 3.0, VariedAttempts(600.0, 6000.0)
    t0 = time.perf_counter()
    runs = []
    for n in in_flight:
        mission = K8sMission(
            n,
            ranges_per_slot=per_slot,
            poll_seconds=args.poll_seconds,
            attempts=attempts,
            peak_flush_seconds=float("inf"),
            profile_steady_pass=n == max(in_flight),
        )
        runs.append(run_k8s_mission(mission))
        print(
            f"{n} in flight: {runs[-1].attempts} attempts, {runs[-1].passes} passes, {runs[-1].wall:.0f} s", flush=True
        )
    wall = time.perf_counter() - t0
    write_result(
        "k8s_api", "Kubernetes API requests per attempt and per pass", tables(runs), notes(runs, wall), args.out
    )
    return runs


if __name__ == "__main__":
    main()

"""Measured against the real thing (issue 34 item 7): the Kubernetes benchmarks' figures on a real control plane
(kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok; tools/k8s/build.sh), beside the same
figures on kubesim, in one run.

- API requests per attempt, 100 -> 2000 in flight (`k8s_api`'s figure): the same mission on each cluster,
  counted by kubesim's server, and on the real one by kube-apiserver's audit log of the dispatcher's account.
- The dispatcher's CPU and memory at 2000 in flight (`dispatcher_cost`'s), from that 2000 mission.
- The first pass at 2000 slots (`first_pass`'s): 2000 Jobs created, and the pods the real Job controller made
  and the real scheduler bound per second, read back from the API server, beside the Job controller's design
  target of 5000 pods a minute; on kwok nodes, which take 2000 pods cheaply.
- The control plane's processes' RSS at 2000 live attempts, on kwok nodes and on virtual kubelets.

The real missions run in real time at the production cadence (poll 1 s); kubesim runs the same missions in
virtual time. Virtual kubelets (kubesim's, as clients of the real API server: `real_cloud`) run the missions
whose attempts must end, since the dispatcher reads each one's log and each node's summary from them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

from benchmarks.dispatcher_cost import warm_bytecode
from benchmarks.harness.as_installed import bytecode
from benchmarks.harness.k8s_real_tables import (
    dispatcher_table,
    first_pass_table,
    kubelet_table,
    memory_table,
    requests_table,
)
from benchmarks.harness.plane_mission import Shape
from benchmarks.harness.plane_runs import run_kubesim, run_real
from benchmarks.harness.report import write_result
from benchmarks.harness.sim_cluster import VariedAttempts

# kube-controller-manager's client rate is 20 requests/s, burst 30, by default
# (pkg/controller/apis/config/v1alpha1/defaults.go), kube-scheduler's 50, burst 100 (component-base's
# RecommendedDefaultClientConnectionConfiguration): the second first-pass row lifts both, to tell the
# controllers' own pace on this machine from their clients' limit.
RAISED = {
    "kube-controller-manager": ["--kube-api-qps=500", "--kube-api-burst=1000"],
    "kube-scheduler": ["--kube-api-qps=500", "--kube-api-burst=1000"],
}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.k8s_real", description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[100, 2000])
    parser.add_argument("--attempts", type=float, nargs=2, default=[400.0, 700.0], metavar=("SHORTEST", "LONGEST"))
    parser.add_argument("--first-pass", type=int, default=2000, help="slots of the first-pass run (kwok nodes)")
    parser.add_argument("--no-raised", action="store_true", help="leave out the first pass with raised client rates")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the benchmark still runs")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    sizes, attempts, first_n = args.in_flight, VariedAttempts(*args.attempts), args.first_pass
    if args.smoke:
        sizes, attempts, first_n, args.no_raised = [4], VariedAttempts(8.0, 16.0), 6, True
    t0 = time.perf_counter()
    walls: dict[str, float] = {}

    def timed(name, fn, *a, **kw):
        start = time.perf_counter()
        print(f"{name}: starting (load {os.getloadavg()[0]:.1f})", flush=True)
        out = fn(*a, **kw)
        walls[name] = time.perf_counter() - start
        print(f"{name}: {walls[name]:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
        return out

    # Every range once (1 range a slot): attempts outlast the real plane's ramp to 2000 running (~5 min here),
    # so that every slot's pod runs at once for a while, and the runs end within ~20 minutes.
    missions, firsts = [], []
    # The dispatcher's processes read bytecode, as the image's do (dispatcher_cost, as_installed.bytecode).
    with contextlib.nullcontext() if args.smoke else bytecode(compiled=True):
        if not args.smoke:
            warm_bytecode(["kubernetes"])
        for n in sizes:
            shape = Shape(n, ranges_per_slot=1.0, attempts=attempts)
            missions.append(timed(f"kubesim, {n} in flight", run_kubesim, shape, "kubesim"))
            missions.append(timed(f"real, {n} in flight", run_real, shape, "real", kwok=False))
        first = Shape(first_n, ranges_per_slot=1.0, attempts=attempts)
        firsts.append(timed("real first pass, kwok nodes", run_real, first, "real, kwok nodes", kwok=True))
        if not args.no_raised:
            label = "real, kwok nodes, controllers' client rate raised"
            firsts.append(timed("real first pass, raised rates", run_real, first, label, kwok=True, extra_args=RAISED))
    largest = max(sizes)
    at_largest = [r for r in missions if r.mission.shape.in_flight == largest]
    sim_largest = next(r for r in at_largest if r.label == "kubesim")
    tables = [
        ("API requests per attempt, kubesim and real", *requests_table(missions)),
        (f"The dispatcher at {largest} in flight", *dispatcher_table(at_largest)),
        (f"The first pass at {first_n} slots", *first_pass_table(firsts, sim_largest)),
        (
            f"RSS of the cluster's processes at {largest} live attempts",
            *memory_table([*firsts[:1], *[r for r in at_largest if r.label == "real"], sim_largest]),
        ),
        ("The virtual kubelets (kubesim's, as clients of the real API server)", *kubelet_table(missions)),
    ]
    total = time.perf_counter() - t0
    notes = "Wall time of each run: " + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items())
    notes += f"; the whole benchmark {total:.0f} s."
    write_result(
        "k8s_real", "Measured against the real thing: kubesim and a real control plane", tables, notes, args.out
    )
    return {"missions": missions, "first_pass": firsts, "walls": walls}


if __name__ == "__main__":
    main()

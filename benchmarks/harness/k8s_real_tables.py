"""`k8s_real`'s tables: each figure on kubesim and on the real control plane, side by side, with the machine's
load average (1 min, lowest-highest during the run) beside it."""

from __future__ import annotations

import math

from benchmarks.harness.plane_mission import MissionRun
from benchmarks.harness.plane_runs import ClusterRun
from benchmarks.harness.pod_timeline import JOB_CONTROLLER_TARGET_PER_MINUTE

MiB, KiB = 1024**2, 1024
INFORMED = ("jobs", "pods")  # what the backend lists once and then polls a watch of, each pass (informer.py)
PER_NODE = ("nodes", "nodes/stats")  # a Node's GET (where its kubelet is, then kept), its kubelet's summary


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def load(run: ClusterRun) -> str:
    lo, hi = run.load_range
    return f"{lo:.1f}-{hi:.1f}"


def split(requests) -> tuple[int, int, int]:
    """(the informers' LISTs and watch polls, per-node reads, the rest). Unlike `sim_cluster.split_requests`, a
    LIST of events stays with the rest: the backend makes one per Job still podless after config_error_seconds
    (refusals.py), so it follows Jobs, not passes."""
    polls = sum(n for (verb, res), n in requests.items() if verb in ("list", "watch") and res in INFORMED)
    per_node = sum(n for (_, res), n in requests.items() if res in PER_NODE)
    return polls, per_node, sum(requests.values()) - polls - per_node


def per_attempt(run: ClusterRun) -> float:
    """Requests per attempt, the informers' LISTs and watch polls and the per-node reads left out (they follow
    passes and nodes)."""
    return split(run.requests)[2] / run.mission.attempts


def at_cap(m: MissionRun) -> list[int]:
    """Passes that began with every slot's attempt live (after the first two, which submit and first read)."""
    cap = m.shape.in_flight
    return [i for i in range(2, len(m.passes)) if m.passes[i - 1].in_flight == cap]


def requests_table(runs: list[ClusterRun]) -> tuple[list[str], list[list[object]]]:
    header = ["per attempt", *[f"{r.label}, {r.mission.shape.in_flight} in flight" for r in runs]]
    polls = {(v, res) for v in ("list", "watch") for res in INFORMED}
    keys = sorted({k for r in runs for k in r.requests if k not in polls}, key=lambda k: (k[1] in PER_NODE, k))
    rows: list[list[object]] = [
        [f"{verb} {res}", *[r.requests.get((verb, res), 0) / r.mission.attempts for r in runs]]
        for verb, res in [*keys, *sorted(polls)]
    ]
    rows.append(["**per attempt, no informer LISTs, watch polls or per-node reads**", *[per_attempt(r) for r in runs]])
    rows.append(["all requests per attempt", *[sum(r.requests.values()) / r.mission.attempts for r in runs]])
    rows.append(
        ["informer LISTs and watch polls per pass", *[split(r.requests)[0] / len(r.mission.passes) for r in runs]]
    )
    rows.append(
        [
            "per-node reads per pass (Node GETs, summaries)",
            *[split(r.requests)[1] / len(r.mission.passes) for r in runs],
        ]
    )
    rows.append(["answers not 2xx (409s: concurrent ConfigMap creates)", *[_not_ok(r) for r in runs]])
    rows.append(["attempts", *[r.mission.attempts for r in runs]])
    rows.append(["passes", *[len(r.mission.passes) for r in runs]])
    rows.append(["ranges done", *[r.mission.statuses.get("done", 0) for r in runs]])
    rows.append(["mission wall s", *[r.mission.wall for r in runs]])
    rows.append(["load average (1 min)", *[load(r) for r in runs]])
    return header, rows


def _not_ok(run: ClusterRun) -> object:
    if not run.codes:
        return "-"
    return sum(n for code, n in run.codes.items() if not 200 <= code < 300)


def dispatcher_table(runs: list[ClusterRun]) -> tuple[list[str], list[list[object]]]:
    header = ["the dispatcher's process", *[f"{r.label}, {r.mission.shape.in_flight} in flight" for r in runs]]
    rows: list[list[object]] = []
    cols = []
    for r in runs:
        m = r.mission
        cap = [m.passes[i] for i in at_cap(m)]
        n = m.shape.in_flight
        cpu, wall = _mean(p.cpu for p in cap), _mean(p.wall for p in cap)
        at_cap_rss = max((p.rss for p in cap), default=math.nan)
        high = max([m.setup_rss, *(max(p.rss, p.max_rss) for p in m.passes)])
        cols.append(
            [
                len(cap),
                _mean(p.reconcile_read for p in cap),
                cpu,
                wall,
                cpu / (wall + m.shape.poll_seconds),
                m.run_cpu / m.wall if r.label == "real" else "-",
                m.setup_rss / MiB,
                at_cap_rss / MiB,
                high / MiB,
                (at_cap_rss - m.setup_rss) / n / KiB,
                load(r),
            ]
        )
    names = [
        "passes at the cap (began with every slot's attempt live)",
        "read s a pass at the cap (observe, summaries and log reads left out)",
        "CPU s a pass at the cap",
        "wall s a pass at the cap",
        "**share of a core at a 1 s poll: CPU / (wall + 1 s)**",
        "share of a core over the whole run, measured (CPU s / wall s)",
        "RSS at start MiB",
        "**RSS at the cap MiB (most after a pass)**",
        "high-water RSS MiB",
        "**KiB per in-flight attempt ((at the cap - start) / in flight)**",
        "load average (1 min)",
    ]
    for i, name in enumerate(names):
        rows.append([name, *[c[i] for c in cols]])
    return header, rows


def first_pass_table(runs: list[ClusterRun], sim: ClusterRun | None) -> tuple[list[str], list[list[object]]]:
    header = ["run", "what", "count", "first s", "last s", "per s", "per min", "most in 60 s", "/ 5000 per min", "load"]
    rows: list[list[object]] = []
    for r in runs:
        first = r.mission.passes[0]
        rows.append(
            [
                r.label,
                "the dispatcher's first pass (its PVC and Job creates)",
                first.submitted,
                0.0,
                first.wall,
                first.submitted / first.wall,
                60 * first.submitted / first.wall,
                "-",
                "-",
                load(r),
            ]
        )
        for s in r.timeline:
            ratio = s.per_minute / JOB_CONTROLLER_TARGET_PER_MINUTE if "pods" in s.what else "-"
            rows.append(
                [r.label, s.what, s.count, s.first, s.last, s.per_second, s.per_minute, s.peak_minute, ratio, load(r)]
            )
    if sim is not None:
        first = sim.mission.passes[0]
        rows.append(
            [
                sim.label,
                "the dispatcher's first pass (its PVC and Job creates)",
                first.submitted,
                0.0,
                first.wall,
                first.submitted / first.wall,
                60 * first.submitted / first.wall,
                "-",
                "-",
                load(sim),
            ]
        )
        rows.append(
            [
                sim.label,
                "pods made, bound and running: every one at its next step (1 virtual s)",
                first.submitted,
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                load(sim),
            ]
        )
    return header, rows


def memory_table(runs: list[ClusterRun]) -> tuple[list[str], list[list[object]]]:
    """RSS of each cluster process when every slot's pod ran (after HOLD s on kwok), the most it reached, and
    its CPU seconds over the run."""
    names = sorted({p for r in runs for p in [*r.rss_all_running, *r.rss_peak]}, key=_process_order)
    header = ["process", *[f"{r.label}: {what}" for r in runs for what in ("all running MiB", "most MiB", "CPU s")]]
    rows = []
    for name in names:
        cells: list[object] = []
        for r in runs:
            now, peak, cpu = r.rss_all_running.get(name), r.rss_peak.get(name), r.cpu.get(name)
            cells += [now / MiB if now else "-", peak / MiB if peak else "-", cpu if cpu is not None else "-"]
        rows.append([name, *cells])
    real = [n for n in names if n in COMPONENTS_ORDER]
    totals: list[object] = []
    for r in runs:
        now, peak = (sum(d.get(n, 0) for n in real) / MiB for d in (r.rss_all_running, r.rss_peak))
        totals += [now or "-", peak or "-", sum(r.cpu.get(n, 0.0) for n in real) or "-"]
    rows.append(["the control plane, together", *totals])
    rows.append(["load average (1 min)", *[x for r in runs for x in (load(r), "", "")]])
    return header, rows


COMPONENTS_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def _process_order(name: str) -> tuple[int, str]:
    return (COMPONENTS_ORDER.index(name) if name in COMPONENTS_ORDER else len(COMPONENTS_ORDER), name)


def kubelet_table(runs: list[ClusterRun]) -> tuple[list[str], list[list[object]]]:
    header = [
        "run",
        "in flight",
        "syncs",
        "sync mean s",
        "sync p95 s",
        "sync most s",
        "failed syncs",
        "summaries served",
        "CPU s",
        "RSS MiB",
        "load",
    ]
    rows = []
    for r in runs:
        c = r.cloud
        if c is None or not c.syncs:
            continue
        rows.append(
            [
                r.label,
                r.mission.shape.in_flight,
                c.syncs,
                c.sync_mean,
                c.sync_p95,
                c.sync_max,
                c.errors,
                c.stats_reads,
                c.cpu,
                c.rss / MiB,
                load(r),
            ]
        )
    return header, rows

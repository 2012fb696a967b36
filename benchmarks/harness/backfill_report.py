"""The report of benchmarks/dagster_backfill.py: the launch's milestones, the run's event log and its wall time
against the baseline, the partitions' marking as the UI reads it, and the notes on how it was measured."""

from __future__ import annotations

import os

from benchmarks.harness.backfill_drive import LEDGERS, OVERLAP
from benchmarks.harness.backfill_process import first

TARGET_LIVE_S = 30.0  # issue 26: Dagster should not be the slow part of a launch


def report(
    args, d: dict, direct: dict | None, leftovers: int, loads, total: float, warm_s: float, others_cpu: float
) -> dict:
    n = args.ranges
    rows, live_s = launch_rows(d, args.live)
    ev = d["events"]
    times = ev["times"]
    step_notes = [x for x in d["notes"] if x["pid"] == times.get("STEP_START", (0, -1))[1]]
    live_note = first(step_notes, "live") or {}

    def span(a, b):
        return times[b][0] - times[a][0] if a in times and b in times else float("nan")

    end_kind = "STEP_SUCCESS" if "STEP_SUCCESS" in times else "STEP_FAILURE"
    run_end = next((k for k in ("RUN_SUCCESS", "RUN_FAILURE", "RUN_CANCELED") if k in times), None)
    backend_for = (first(step_notes, "backend_for") or {}).get("t")
    dispatch_s = times[end_kind][0] - backend_for if backend_for and end_kind in times else float("nan")
    run_s = span("RUN_START", run_end) if run_end else float("nan")
    event_rows = [
        ["event-log entries of the run", ev["count"], f"{ev['count'] / n:.2f}"],
        *[[f"  {k}", v, f"{v / n:.3f}"] for k, v in sorted(ev["by_type"].items(), key=lambda kv: -kv[1])],
        ["serialized entries, bytes", f"{ev['serialized_bytes']:,}", f"{ev['serialized_bytes'] / n:,.0f}"],
        [
            d["storage_label"],
            f"{d['history_bytes']:,}",
            f"{d['history_bytes'] / n:,.0f}",
        ],
        ["compute logs (storage/), bytes", f"{d['compute_log_bytes']:,}", f"{d['compute_log_bytes'] / n:,.0f}"],
    ]
    wall_rows = [
        ["Dagster: RUN_START to " + (run_end or "?"), f"{run_s:.1f}", f"{run_s / n * 1000:.1f}"],
        [
            "Dagster: STEP_START to " + end_kind,
            f"{span('STEP_START', end_kind):.1f}",
            f"{span('STEP_START', end_kind) / n * 1000:.1f}",
        ],
        [
            "Dagster: step's dispatch (backend_for to " + end_kind + ")",
            f"{dispatch_s:.1f}",
            f"{dispatch_s / n * 1000:.1f}",
        ],
    ]
    if direct:
        wall_rows += [
            [
                "run_mission without Dagster (same workload, backend, poll)",
                f"{direct['wall_s']:.1f}",
                f"{direct['wall_s'] / n * 1000:.1f}",
            ],
            [
                "overhead: step's dispatch - run_mission",
                f"{dispatch_s - direct['wall_s']:.1f}",
                f"{(dispatch_s - direct['wall_s']) / n * 1000:.1f}",
            ],
            [
                "overhead: whole run - run_mission",
                f"{run_s - direct['wall_s']:.1f}",
                f"{(run_s - direct['wall_s']) / n * 1000:.1f}",
            ],
        ]
    tables = [
        (
            f"Launch to {args.live} attempts live ({n} partitions, one run; seconds since the mutation was sent)",
            ["milestone", "at s", "since previous s"],
            rows,
        ),
        (f"Event log of the run that drove all {n} ranges", ["what", "total", "per range"], event_rows),
        ("Wall time of the run against the same mission without Dagster", ["what", "s", "ms per range"], wall_rows),
        (
            f"Partition marking of the run, from the status cache as the UI reads it ({d['condemned']} ranges "
            "condemned by the run)",
            ["when", "IN_PROGRESS", "FAILED", "MATERIALIZED", "no status"],
            [
                [when, *(d[key].get(state, 0) for state in ("IN_PROGRESS", "FAILED", "MATERIALIZED", "none"))]
                for when, key in (
                    (f"as {args.live} attempts are live", "marks_at_live"),
                    ("2 s later", "marks_after_live"),
                    (f"after the run ({d['run_status']})", "marks_at_end"),
                )
            ],
        ),
    ]
    if d.get("backfill_profile"):
        tables.append(
            (
                "cProfile of the backfill daemon iteration that created the run (top by cumulative)",
                ["function", "calls", "own s", "cumulative s"],
                d["backfill_profile"],
            )
        )
    if d.get("profile"):
        tables.append(
            (
                f"cProfile of the step process, resource setup to {args.live} live (top by cumulative)",
                ["function", "calls", "own s", "cumulative s"],
                d["profile"],
            )
        )
    met = live_s <= TARGET_LIVE_S
    # Subset mode: the daemon writes one, the run one per range it starts (and per unfinished range if it fails).
    planned_all = ev["by_type"].get("ASSET_MATERIALIZATION_PLANNED", 0)
    planned = 1 if args.planned_events == "subset" else planned_all
    iteration = d["t_backfill_iteration"] - d["t_mutation"]
    first_submit = (first(step_notes, "first_submit") or {}).get("t")
    submits = live_note.get("submits", 0)
    per_submit = float("nan")
    if first_submit and live_note:
        per_submit = (live_note["t"] - first_submit) / max(submits - 1, 1) * 1000
    created_to_live = live_s - (d["t_backfill_iteration"] - d["t0"])
    lines = [
        f"**{args.live} attempts live {live_s:.1f} s after the backfill's launch** "
        f"(target: within {TARGET_LIVE_S:g} s): "
        + ("met" if met else f"missed by {live_s - TARGET_LIVE_S:.1f} s")
        + ". "
        f"The backfill daemon iteration that creates the run took {iteration:.1f} s"
        + (
            f": it writes the run's {planned} ASSET_MATERIALIZATION_PLANNED events one by one, "
            + (
                "each opening SQLite connections and committing to the run's shard and to the index"
                if args.storage == "sqlite"
                else "each its own Postgres transaction (insert, asset index updates, commit, NOTIFY)"
            )
            + f" ({iteration / planned * 1000:.1f} ms "
            "of the iteration per planned event; "
            if planned > 1
            else f" with {planned} ASSET_MATERIALIZATION_PLANNED event for the whole partition range ("
        )
        + f"`--planned-events {args.planned_events}`"
        + (
            f"; the run wrote the other {planned_all - planned}, one per range it started, in batches off the "
            "dispatcher's thread"
            if args.planned_events == "subset"
            else ""
        )
        + "). From the run's creation to "
        f"{args.live} live: {created_to_live:.1f} s, of which the dispatcher's first pass "
        f"{per_submit:.1f} ms per attempt submitted (attempt record as Parquet, fsync'd, then submit).",
        "",
        (
            f"The run did not finish within --timeout {args.timeout:g} s and was terminated: the per-range figures "
            f"below divide by all {n} partitions though only {d['materialized']} completed.\n\n"
            if d["terminated"]
            else ""
        )
        + f"Run `{d['run_id'][:8]}` {d['run_status']}; the backfill {d['backfill_status']} "
        f"(its next daemon iteration took {d['backfill_final_iteration_s']:.1f} s); "
        f"{d['materialized']} of {n} partitions materialized; run tags {d['run_tags']}. "
        f"Setup outside the timing: mission_plan (execute_in_process) {d['plan_s']:.1f} s, code server start "
        f"{d['code_server_s']:.1f} s. Whole benchmark {total:.0f} s wall; {leftovers} run process(es) left at the end "
        "(ended by pid).",
        "",
        f"Mission: {n} ranges of {LEDGERS} ledgers (overlap {OVERLAP}), `{args.order}` "
        + ("from the workload's own profile" if args.order == "longest-first" else "without a profile")
        + f", parallelism {args.parallelism}; dispatcher poll {args.poll:g} s real, status line every 30 passes. "
        f"Attempts on `VirtualBackend` over `Workload(ranges={n})`: the backend's clock is real time until "
        f"{args.live} attempts are held (nothing of the workload ends within minutes), then {args.speed:g}x, so the "
        "run drains the mission's hours in minutes; the dispatcher keeps its system clock. The step's "
        f"first pass submitted {live_note.get('submits', '?')} attempts to reach {live_note.get('held', '?')} held.",
        "",
        "The pipeline is the production one except for the daemons' clocks: the benchmark runs one backfill "
        "daemon iteration right after the mutation and one run queue iteration right after that. A deployment "
        "adds up to one backfill daemon interval (30 s by default) before the run is created and up to one "
        "queue interval (`dequeue_interval_seconds`, 5 s by default) before it is launched: up to ~35 s more, "
        "~17 s on average. The code server was already running (as under `dagster dev`); the run worker and the "
        "step worker (the default multiprocess executor) are new processes that import Dagster and the code location.",
        "",
        (
            "Bytecode: this environment sets PYTHONDONTWRITEBYTECODE, so every new process compiles every module it "
            "imports (~5 s more per process here). The Dagster processes ran with it unset and a bytecode cache of "
            "their own (PYTHONPYCACHEPREFIX, "
            + (f"warmed before the timing in {warm_s:.1f} s" if not args.smoke else "not warmed in --smoke")
            + "), as a deployment image with "
            "compiled packages runs; `--bytecode as-is` measures without."
            if args.bytecode == "cached"
            else "Bytecode: as this environment has it (`--bytecode as-is`): with PYTHONDONTWRITEBYTECODE set, the run "
            "worker and the step worker compile every module they import."
        ),
        "",
        "Event log: every entry of the run (`instance.all_logs`), including the materialization-planned events the "
        "backfill daemon writes; bytes as Dagster serializes them, and the growth of the instance's storage "
        f"between the launch and the run's end. {d['storage_what']} Wall: the run's own event timestamps; the "
        "baseline is `run_mission` "
        "in the benchmark process, after the Dagster run, over a fresh storage root, with the same resource's "
        "policies and backend"
        + (
            f" (its prepare {direct['prepare_s']:.2f} s is outside its wall; it reached {args.live} live "
            f"{direct['live_s']:.1f} s after backend_for, the Dagster step "
            f"{(live_note.get('t', float('nan')) - (backend_for or float('nan'))):.1f} s; "
            f"{direct['submits']} submits, {direct['passes']} passes, {direct['done']} done)."
            if direct
            else "."
        ),
        "",
        f"Other work on the machine: {others_cpu:.0f} CPU-seconds during the benchmark "
        f"({others_cpu / total:.2f} of the {os.cpu_count()} cores on average; processes outside this benchmark's "
        "process tree, sampled each second)"
        + (": the machine was shared, timings are inflated accordingly" if others_cpu / total > 0.25 else "")
        + f". Load average (1, 5, 15 min, this benchmark included) at the start {fmt_load(loads[0])}, after the "
        f"Dagster run {fmt_load(loads[1])}, at the end {fmt_load(loads[2])}.",
    ]
    return {"tables": tables, "notes": "\n".join(lines), "live_s": live_s}


def launch_rows(d: dict, live: int) -> tuple[list[list[object]], float]:
    """Milestones from sending the mutation to `live` attempts held, seconds since the mutation."""
    t0, notes, times = d["t0"], d["notes"], d["events"]["times"]
    run_pid = times.get("RUN_START", (None, None))[1]
    step_pid = times.get("STEP_START", (None, None))[1]
    run_loaded = first(notes, "location_loaded", run_pid) if run_pid else None
    step_loaded = first(notes, "location_loaded", step_pid) if step_pid else None
    step_notes = [n for n in notes if n["pid"] == step_pid] if step_pid else notes

    def ev(kind):
        return times[kind][0] if kind in times else None

    marks = [
        ("backfill requested: GraphQL launchPartitionBackfill returned", d["t_mutation"]),
        ("backfill daemon iteration returned: the run is created and queued", d["t_backfill_iteration"]),
        ("run queue daemon iteration returned: the code server was asked to launch it", d["t_queue_iteration"]),
        ("run worker process created", run_loaded["created"] if run_loaded else None),
        ("run worker loaded the code location", run_loaded["t"] if run_loaded else None),
        ("RUN_START event", ev("RUN_START")),
        ("step worker process created", step_loaded["created"] if step_loaded else None),
        ("step worker loaded the code location", step_loaded["t"] if step_loaded else None),
        ("STEP_START event", ev("STEP_START")),
        ("resource set up (range_catchup body starts)", (first(step_notes, "resource_setup") or {}).get("t")),
        ("mission loaded and prepared: backend_for", (first(step_notes, "backend_for") or {}).get("t")),
        ("first attempt submitted", (first(step_notes, "first_submit") or {}).get("t")),
        (f"{live} attempts live", (first(step_notes, "live") or {}).get("t")),
    ]
    rows, prev = [], t0
    for label, t in sorted((m for m in marks if m[1] is not None), key=lambda m: m[1]):
        rows.append([label, f"{t - t0:.2f}", f"{t - prev:+.2f}"])
        prev = t
    rows += [[label, "n/a", "n/a"] for label, t in marks if t is None]
    live_t = (first(step_notes, "live") or {}).get("t")
    return rows, (live_t - t0) if live_t else float("nan")


def fmt_load(load) -> str:
    return "/".join(f"{x:.1f}" for x in load)

"""The demo: two missions over a simulated history, run through Dagster on a persistent instance.

The first mission runs with no profile (every range on the catch-all tier, OOMs
climb the ladder); the second is sized from the first's profile, longest first.
Memory is the production model scaled down (`memory_scale`), so the same
ladder, margins and headroom apply in MiB instead of GiB.

Each mission is what an operator does in the UI, in the same order, on the same
instance: materialize `mission_plan`, run `range_catchup_job` over the plan's
partitions as one run, run `profile_job` (range_profile, tier_map, profile_diff). The demo's
directory keeps the Dagster home (SQLite), the storage root (Parquet), the
local backend's work directory and the code location the UI opens:

    <dir>/dagster_home/          DAGSTER_HOME: dagster.yaml, runs, events
    <dir>/storage/<mission>/     plan, attempts, logs, range_profile, tier_map, profile_diff
    <dir>/work/                  attempts in flight, per-range data directories
    <dir>/catchup_location.py    the definitions with the demo's CatchupResource
    <dir>/workspace.yaml         what `dagster dev -w` loads

Progress is read from durable state only (attempt records and the backend's
registry), as any second observer would, never from the dispatcher's memory.
"""

from __future__ import annotations

import os
import sys
import time
from shlex import quote as q
from typing import TextIO

import dagster as dg

from catchup_assets.cli.demo.archive import repair_command
from catchup_assets.cli.demo.mission import DemoFailed, DemoInterrupted, run_one
from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.cli.demo.web_console import TOKEN_FILE, console_command, start_console
from catchup_assets.core.aggregate.kpis import AUTOPILOT, percent
from catchup_assets.core.forecast.cost import COST_NOTE
from catchup_assets.defs.location import load_location, project_root, ui_command, write_home, write_location
from catchup_assets.defs.mission.range_events import SUBSET_ENV
from catchup_assets.defs.resources import deployment_catchup
from catchup_assets.mission.report import cost_verdict, side_by_side
from catchup_assets.mission.stop_signals import exit_code, stop_on_signals


def diff_command(storage_root: str, a: str, b: str, memory_scale: float) -> str:
    """The shell command that prints `catchup-assets diff` of the two missions, in production figures."""
    cmd = f"catchup-assets diff --root {q(storage_root)} {a} {b} --memory-scale {memory_scale:g}"
    root = project_root()
    return cmd if root is None else f"cd {q(str(root))} && uv run {cmd}"


def run_demo(settings: DemoSettings, out: TextIO = sys.stdout, log_level: str = "CRITICAL") -> int:
    settings.directory.mkdir(parents=True, exist_ok=True)
    console = start_console(settings, out)
    try:
        return _run_demo(settings, out, log_level)
    finally:
        if console is not None:
            console.close()


def _run_demo(settings: DemoSettings, out: TextIO, log_level: str) -> int:
    home = settings.home
    write_home(home)
    workspace = write_location(settings.directory, settings.catchup())
    # The very file the UI loads: the runs below use its resources, not a copy of them.
    defs = load_location(settings.directory)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    first, second = f"demo-{stamp}-a", f"demo-{stamp}-b"
    started = time.monotonic()
    if settings.metrics_port:
        print(f"metrics: http://127.0.0.1:{settings.metrics_port}/metrics while each mission runs", file=out)
    # As the chart's daemon and webserver: each run's ranges planned as one subset, each started
    # range's row written by range_catchup (defs/mission/range_events.py); set here, where the demo starts.
    os.environ[SUBSET_ENV] = "true"
    # A stop signal between the runs is noted too (each dispatch stops on its own: run_mission).
    with dg.DagsterInstance.from_config(str(home)) as instance, stop_on_signals(lambda why: None):
        try:
            a = run_one(instance, defs, settings, first, None, "tip-first", log_level)
            b = run_one(instance, defs, settings, second, a.paths["profile"], "longest-first", log_level)
        except DemoInterrupted as exc:
            print(f"\ncatchup-assets demo: {exc}", file=out)
            print(f"\nthe runs are in the Dagster UI:\n  {ui_command(home, workspace)}", file=out)
            return exit_code(exc.signum)
        except DemoFailed as exc:
            print(f"catchup-assets demo: {exc}", file=sys.stderr)
            print(f"\nthe runs are in the Dagster UI:\n  {ui_command(home, workspace)}", file=sys.stderr)
            return 1
    total = time.monotonic() - started
    scale = deployment_catchup(defs).scale()
    memory_scale = scale.memory
    print("\n" + side_by_side([a.summary, b.summary], memory_scale), file=out)
    print(
        "\nmemory, hours, node and dollar figures in production scale, as the UI's metadata shows them "
        f"(the demo runs memory x {memory_scale:g} and time x {scale.time:,.0f}); wall time is real "
        f"(the range_catchup run; both missions with planning and profiling took {total:.0f} s)",
        file=out,
    )
    print(f"cost: {cost_verdict(a.summary, b.summary)}; {COST_NOTE}", file=out)
    print(f"sizing KPIs (docs/cost.md) against {AUTOPILOT}", file=out)
    for m in (a, b):
        by_tier = m.summary.kpis.slack_by_tier if m.summary.kpis else {}
        tiers = ", ".join(f"{t} {percent(s)}" for t, s in by_tier.items()) or "-"
        print(f"  memory slack by tier, {m.mission}: {tiers}", file=out)
    for m in (a, b):
        print(f"\n{m.mission}:", file=out)
        for what, path in m.paths.items():
            print(f"  {what:<9} {path}", file=out)
        for key, why in sorted(m.condemned.items()):
            print(f"  condemned {key}: {why}", file=out)
    print(
        "\nthe two missions by ledger band (memory requested, peaks, time, regressions; "
        f"profile_diff in the UI):\n  {diff_command(settings.storage_root, a.mission, b.mission, memory_scale)}",
        file=out,
    )
    print(f"\nDagster instance  {home}", file=out)
    print(
        "open it in the UI (runs, partitions, the profile's plots; launch the next mission):\n"
        f"  {ui_command(home, workspace)}",
        file=out,
    )
    print(
        "and the mission console over its storage (each mission's ranges, live, and its controls):\n"
        f"  {console_command(settings.storage_root, settings.directory / TOKEN_FILE)}",
        file=out,
    )
    condemned = sorted(set(a.condemned) | set(b.condemned))
    if condemned:
        # The last word: what failed; and, when asked for, how to try the failure walk on it.
        print(f"\n{len(condemned)} ranges condemned: {', '.join(condemned)}", file=out)
        if settings.fail_ranges:
            print(
                f"(--fail-ranges {settings.fail_ranges}: the simulated archive is corrupt there) to backfill them, "
                f'repair it, then reload and backfill in the UI (docs/how-to.md, "Backfill failed ranges"):\n'
                f"  {repair_command(settings.directory)}",
                file=out,
            )
    return 1 if condemned else 0

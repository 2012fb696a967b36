"""`catchup-assets cleanup`: delete what an abandoned mission left on its backend (mission/cleanup.py)."""

from __future__ import annotations

import argparse
import json
import os

from catchup_assets.core.errors import ConfigError


def resource_of(args: argparse.Namespace):
    """The deployment's CatchupResource: `--settings` (the chart's or the demo's catchup.json), the root given."""
    from catchup_assets.defs.resources import CatchupResource

    settings: dict = {}
    if args.settings:
        try:
            with open(args.settings) as f:
                settings = json.load(f)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--settings: {args.settings} is not a readable JSON file: {exc}") from None
        if not isinstance(settings, dict):
            raise ConfigError(f"--settings: {args.settings} must hold a JSON object of CatchupResource settings")
    settings["storage_root"] = args.root
    if args.work_dir:
        settings["work_dir"] = args.work_dir
    return CatchupResource(**settings)


def dagster_runs(mission: str) -> tuple[list[str], list[str]]:
    """The mission's Dagster runs that can still run or retry, asked of the instance at DAGSTER_HOME;
    or, when there is none to ask, why not (the plan then refuses without --force)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return [], ["DAGSTER_HOME is not set, so Dagster's runs of the mission were not asked"]
    import dagster as dg

    from catchup_assets.defs.mission.cleanup_job import live_runs

    try:
        with dg.DagsterInstance.get() as instance:
            return live_runs(instance, mission), []
    except Exception as exc:  # noqa: BLE001 - any failure to ask is said, and --force overrides it
        return [], [f"the Dagster instance at DAGSTER_HOME={home} did not answer: {' '.join(str(exc).split())[:300]}"]


def command(args: argparse.Namespace) -> int:
    from catchup_assets.core.plan.config import validate_mission
    from catchup_assets.defs.resources.backend import backend_for
    from catchup_assets.mission.cleanup import WaitProgress, cleanup
    from catchup_assets.mission.cleanup_settle import settled_plan

    validate_mission(args.mission)  # before it names anything: a path, a label, a run tag
    resource = resource_of(args)
    backend = backend_for(resource, args.mission)
    live, unchecked = dagster_runs(args.mission)
    plan, settled = settled_plan(
        resource.root(),
        args.mission,
        backend,
        everything=args.all,
        also_live=live,
        unchecked=unchecked,
        force=args.force,
        dry_run=args.dry_run,
    )
    print("\n".join(plan.lines() + settled.lines()), flush=True)  # what each choice frees, before anything goes
    progress = WaitProgress(lambda line: print(line, flush=True))
    result = cleanup(
        plan, backend, force=args.force, dry_run=args.dry_run, wait_seconds=args.wait, on_wait=progress.said
    )
    print("\n".join(result.lines()))
    return 0

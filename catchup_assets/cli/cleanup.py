"""`catchup-assets cleanup`: delete what an abandoned mission left on its backend (mission/cleanup.py)."""

from __future__ import annotations

import argparse
import json

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


def command(args: argparse.Namespace) -> int:
    from catchup_assets.defs.resources.backend import backend_for
    from catchup_assets.mission.cleanup import WaitProgress, cleanup, plan_cleanup

    resource = resource_of(args)
    backend = backend_for(resource, args.mission)
    plan = plan_cleanup(resource.root(), args.mission, backend, everything=args.all)
    print("\n".join(plan.lines()), flush=True)  # what each choice frees, before anything goes
    progress = WaitProgress(lambda line: print(line, flush=True))
    result = cleanup(
        plan, backend, force=args.force, dry_run=args.dry_run, wait_seconds=args.wait, on_wait=progress.said
    )
    print("\n".join(result.lines()))
    return 0

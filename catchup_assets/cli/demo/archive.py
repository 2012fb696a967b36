"""The demo's simulated history archive: `--fail-ranges N` corrupts it at N ranges, `--repair` mends it.

The corruption is a setting of the demo's code location (`sim_fail_targets` in `catchup.json`,
beside `catchup_location.py`), so the UI's runs see it as the demo's did, and the repair is
what an operator does to a broken archive: fix it where it is, reload, backfill.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from shlex import quote as q
from typing import TextIO

from catchup_assets.core.errors import ConfigError
from catchup_assets.defs.location import SETTINGS_FILE, project_root

FAIL_TARGETS = "sim_fail_targets"


def repair_command(directory: Path) -> str:
    """The shell command that repairs the demo's archive in `directory`."""
    cmd = f"catchup-assets demo --repair --dir {q(str(directory))}"
    root = project_root()
    return cmd if root is None else f"cd {q(str(root))} && uv run {cmd}"


def repair(directory: Path, out: TextIO = sys.stdout) -> int:
    """Clear the corrupt ranges from the demo's settings in `directory`; say what to do next."""
    path = directory / SETTINGS_FILE
    if not path.is_file():
        raise ConfigError(f"--dir: {directory} holds no demo ({SETTINGS_FILE} missing): run catchup-assets demo first")
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not readable as JSON: {exc}") from None
    if not isinstance(settings, dict):
        raise ConfigError(f"{path}: not a JSON object of CatchupResource settings")
    targets = settings.get(FAIL_TARGETS) or []
    if not targets:
        print(f"the demo's archive in {directory} has no corrupt range: nothing to repair", file=out)
        return 0
    settings[FAIL_TARGETS] = []
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(settings, indent=1))
    tmp.replace(path)  # a kill mid-write leaves the old settings, never a torn file
    ledgers = ", ".join(str(t) for t in targets)
    print(
        f"repaired the demo's archive: stellar-core can catch up to ledger {ledgers} again ({path})\n"
        'in the Dagster UI: Deployment > "Reload all" (the code location reads it), then Catalog > range_catchup > '
        'Partitions, "Materialize…", Partition selection "Failed", "Launch backfill" ("Launch 1 run" for one range)',
        file=out,
    )
    return 0

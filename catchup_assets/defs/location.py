"""A Dagster home for the embedded default: the instance config and a code location.

`INSTANCE_YAML` is the one source of the instance config; the repository's
`dagster.yaml` is the same text (a test holds them equal), and `write_home`
copies it into a new `DAGSTER_HOME`.

The demo runs missions with scaled-down resources (memory x 1/200, a simulated
stellar-core at 300000x speed). Opening its instance in the UI with the plain
code location (`catchup_assets.defs.definitions`) would plan the next mission at
production scale, GiB per range, on the laptop. So the demo writes its own
code location beside its instance: a short Python file that builds the
project's definitions with the demo's `CatchupResource` settings (read
from `catchup.json` beside it and validated by the resource at load), and a
`workspace.yaml` that loads it. The demo runs its missions through that very
file, so the UI launches exactly what the demo ran.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from shlex import quote as q
from typing import Any

import dagster as dg
import yaml

from catchup_assets.core.errors import ConfigError
from catchup_assets.defs.mission.range_events import SUBSET_ENV
from catchup_assets.defs.resources import CatchupResource, deployment_resource

INSTANCE_FILE = "dagster.yaml"
LOCATION_FILE = "catchup_location.py"
WORKSPACE_FILE = "workspace.yaml"
LOCATION_NAME = "catchup_assets"

INSTANCE_YAML = """\
# The Dagster instance of the embedded default (DAGSTER_HOME).
# catchup_assets/defs/location.py holds the same text (INSTANCE_YAML) and copies it into
# the demo's home; tests/defs/test_workspace.py keeps the two equal.
#
# Run, event and schedule storage: SQLite under $DAGSTER_HOME (the default when
# `storage` is unset). The Helm chart sets Postgres instead.

# Runs wait in a queue; the daemon (part of `dagster dev`) starts them. Dagster's
# QueuedRunCoordinator, which also tags a backfill's range_catchup run with its
# mission as it queues (catchup_assets/defs/instance/run_coordinator.py).
run_coordinator:
  module: catchup_assets.defs.instance.run_coordinator
  class: MissionRunCoordinator

concurrency:
  runs:
    # One run is one dispatcher over a contiguous span of ranges; a backfill of
    # scattered failed ranges is one run per contiguous group, and they all share
    # the mission's `parallelism`. A queued run's ranges wait, so allow a few.
    max_concurrent_runs: 10

# Re-run a run whose process died (killed, node lost): its dispatcher resumes
# from the attempt records and adopts live attempts. A run that failed because
# ranges were condemned (an asset's Failure) is NOT retried: condemned ranges
# wait for an operator (L9).
run_retries:
  enabled: true
  max_retries: 2
  retry_on_asset_or_op_failure: false

# Fail runs stuck starting or cancelling. Locally the code server marks a run
# whose process died as failed; on Kubernetes the run launcher's health check
# does (this daemon polls it). Resuming a run worker is left to run_retries.
run_monitoring:
  enabled: true
  start_timeout_seconds: 300
  cancel_timeout_seconds: 300
  poll_interval_seconds: 60
  max_resume_run_attempts: 0

# The dispatcher's status line (done, in flight, queued, the time to go) and its
# warnings and alerts (a condemned range, no completion for a long time, new
# dispatches stopped, a backend not answering) are logged by the `catchup_assets`
# loggers and the run's own: captured into the run's event log at INFO, so the UI
# shows the mission's progress on the run (issue 36: at WARNING it showed none).
python_logs:
  python_log_level: INFO
  managed_python_loggers:
    - catchup_assets

telemetry:
  enabled: false

nux:
  enabled: false
"""

SETTINGS_FILE = "catchup.json"
# The same text for every demo: no value is formatted into code. The settings
# sit beside it as JSON and are validated by CatchupResource when it loads.
_LOCATION_SOURCE = '''\
"""Written by `catchup-assets demo`: the project's code location with this demo's resources."""

import json
from pathlib import Path

from catchup_assets.defs.location import definitions_with

defs = definitions_with(**json.loads((Path(__file__).parent / "catchup.json").read_text()))
'''

_WORKSPACE = {"load_from": [{"python_file": {"relative_path": LOCATION_FILE, "location_name": LOCATION_NAME}}]}


def write_home(home: Path) -> Path:
    """Create `home` (a DAGSTER_HOME) with the project's instance config; returns dagster.yaml."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / INSTANCE_FILE
    if not path.exists() or path.read_text() != INSTANCE_YAML:
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(INSTANCE_YAML)
        tmp.replace(path)
    return path


def definitions_with(**catchup: Any) -> dg.Definitions:
    """The project's definitions (assets, checks, jobs, sensors) with this `catchup` resource."""
    return definitions_for(CatchupResource(**catchup))


def definitions_for(catchup: CatchupResource) -> dg.Definitions:
    """The project's definitions with `catchup` (a CatchupResource or a subclass) as the resource."""
    from catchup_assets.defs.assets.launchpad import mission_plan_config
    from catchup_assets.defs.assets.range_assets import PLAN_KEY, build_mission_plan
    from catchup_assets.defs.definitions import unguarded_definitions
    from catchup_assets.defs.mission.plan_job import with_plan_guard

    base = unguarded_definitions()
    # The launchpad pre-fills mission_plan with this deployment's defaults, not production's.
    plan = build_mission_plan(mission_plan_config(catchup.mission_defaults))
    assets = [plan if isinstance(a, dg.AssetsDefinition) and a.key == PLAN_KEY else a for a in base.assets or []]
    return with_plan_guard(
        dg.Definitions(
            assets=assets,
            asset_checks=base.asset_checks,
            jobs=base.jobs,
            sensors=base.sensors,
            schedules=base.schedules,
            loggers=base.loggers,
            executor=base.executor,
            metadata=base.metadata,
            resources={**(base.resources or {}), "catchup": deployment_resource(catchup)},
        )
    )


def write_location(directory: Path, catchup: dict[str, Any]) -> Path:
    """Write the demo's code location, its settings and its workspace.yaml; returns the workspace."""
    CatchupResource(**catchup)  # refuse bad settings here, not when the UI loads them
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SETTINGS_FILE).write_text(json.dumps(catchup, indent=1))
    (directory / LOCATION_FILE).write_text(_LOCATION_SOURCE)
    workspace = directory / WORKSPACE_FILE
    workspace.write_text(yaml.safe_dump(_WORKSPACE, sort_keys=False))
    return workspace


def load_location(directory: Path) -> dg.Definitions:
    """The `defs` of the code location file in `directory`, loaded as `dagster dev` loads it."""
    path = directory / LOCATION_FILE
    spec = importlib.util.spec_from_file_location("catchup_location", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    defs = getattr(module, "defs", None)
    if not isinstance(defs, dg.Definitions):
        raise ConfigError(f"{path}: has no `defs`")
    return defs


def project_root() -> Path | None:
    """The source checkout this package runs from (where `uv run` works), if any."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").exists() else None


def ui_command(home: Path, workspace: Path) -> str:
    """The shell command that opens `home` in the Dagster UI with `workspace`'s code location."""
    root = project_root()
    # Runs the UI creates are planned as one subset, as the chart's webserver and daemon plan them.
    env = f"{SUBSET_ENV}=true DAGSTER_HOME={q(str(home))}"
    if root is None:  # an installed package: dagster is on the same PATH as catchup-assets
        return f"{env} dagster dev -w {q(str(workspace))}"
    return f"cd {q(str(root))} && {env} uv run dagster dev -w {q(str(workspace))}"

"""The deployment's `catchup` resource, fixed when the code location loads: no launch can change it.

Bound as a `CatchupResource` (a ConfigurableResource), every field would be run config: the
launchpad could raise `mission_defaults.max_parallelism`, the retry budgets, the storage root
or the memory scale for one launch. Bound here, its config schema is empty, so Dagster's own
config check refuses a run config that sets any of it before a run exists; the settings come
from the code location (the chart's catchup.json, the demo's, EnvVar fields), and the UI's
Resources page shows them in the description.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

from catchup_assets.core.errors import ConfigError
from catchup_assets.defs.resources.resource import CatchupResource

KEY = "catchup"


def deployment_resource(catchup: CatchupResource) -> dg.ResourceDefinition:
    """`catchup` as a resource whose launch config is empty: what Definitions bind under KEY."""

    def fixed_catchup_resource(_context) -> Iterator[CatchupResource]:
        # EnvVar fields resolve in the process that runs, as a ConfigurableResource's would. The context
        # manager form: the plain one enters an ephemeral DagsterInstance it exits only when garbage
        # collected, out of order with the run's, leaving a dead one current for the next Definitions
        # loaded ("Attempted to resolve undefined DagsterInstance weakref", dagster 1.13).
        with catchup.process_config_and_initialize_cm() as value:
            yield value

    return dg.ResourceDefinition(
        resource_fn=fixed_catchup_resource, config_schema=dg.Shape({}), description=describe(catchup)
    )


def deployment_catchup(defs: dg.Definitions) -> CatchupResource:
    """The CatchupResource a Definitions runs with, however it is bound (fixed, or plainly in a test)."""
    with dg.build_resources({KEY: defs.resources[KEY]}) as resources:
        return getattr(resources, KEY)


def _root(catchup: CatchupResource) -> str:
    try:
        return catchup.root()
    except ConfigError:
        return "$CATCHUP_STORAGE_ROOT, else $DAGSTER_HOME/catchup/storage, read when a run starts"


def describe(catchup: CatchupResource) -> str:
    """What the UI's Resources page shows: the settings an operator checks before a launch."""
    d = catchup.mission_defaults
    intro = (
        "This deployment's settings, fixed when the code location loads: a launch cannot change them "
        "(set them in the chart's values, or the demo's catchup.json)."
    )
    lines = [
        f"backend: {catchup.backend}",
        f"storage root: `{_root(catchup)}`",
        f"parallelism: {d.parallelism} by default, at most {d.max_parallelism} (mission_defaults.max_parallelism)",
        f"a plan may retire at most {d.max_retire_share:.0%} of the partitions (mission_defaults.max_retire_share)",
        "retry budgets: " + ", ".join(f"{k} {v}" for k, v in catchup.retry.model_dump().items()),
        f"memory scale: x{catchup.memory_scale:.4g}",
    ]
    if note := catchup.scale().label():
        lines.append(f"scale: {note}")
    # Markdown, as the Resources page renders it: one item per setting.
    return intro + "\n\n" + "\n".join(f"- {line}" for line in lines)

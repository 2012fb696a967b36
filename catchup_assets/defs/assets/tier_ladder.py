"""The tier_ladder asset: a ladder fitted to each new profile (issue 15), a thin wrapper around mission/ladder.py.

Downstream of range_profile, in profile_job: it writes `<mission>/tier_ladder.yaml`, the
chart values of the ladder that makes the next mission cheapest on this deployment's
catalog, and shows it against the ladder in use. The next mission uses it once an
operator applies those values (`helm upgrade ... -f tier_ladder.yaml`).
"""

import dagster as dg

from catchup_assets.core.forecast.fit import NothingToFit
from catchup_assets.defs.metadata.cost import ladder_metadata
from catchup_assets.defs.mission.run_context import mission_partition, missions_partitions_def, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.ladder import build_tier_ladder


@dg.asset(
    group_name="mission",
    partitions_def=missions_partitions_def,
    deps=["range_profile"],
    kinds={"yaml"},
    output_required=False,
)
def tier_ladder(context: dg.AssetExecutionContext, catchup: CatchupResource):
    """Tier cuts and node shapes fitted to the profile: the chart values, and what they save."""
    mission = mission_partition(context)
    slots = catchup.mission_defaults.parallelism
    try:
        out = build_tier_ladder(
            catchup.root(), mission, catchup.placement(), slots, catchup.memory_scale, catchup.scale().time
        )
    except NothingToFit as exc:
        # A mission whose every range was condemned times nothing: no ladder, and no failed profile_job.
        context.log.warning(f"tier_ladder of mission {mission}: {exc}; no ladder fitted")
        return
    except ValueError as exc:
        raise refused("tier_ladder", exc) from None
    yield dg.MaterializeResult(metadata=ladder_metadata(mission, out, catchup.placement(), catchup.scale()))

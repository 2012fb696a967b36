"""The profile_diff asset: each mission against the one it was sized from, a thin wrapper around mission/diff.py."""

import dagster as dg
from pydantic import Field

from catchup_assets.core.aggregate.band_diff import DEFAULT_BAND_LEDGERS, DEFAULT_THRESHOLD
from catchup_assets.defs.metadata.diff_metadata import profile_diff_metadata
from catchup_assets.defs.mission.run_context import mission_partition, missions_partitions_def, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.diff import build_profile_diff


class ProfileDiffConfig(dg.Config):
    """How the diff cuts and judges: bands of ledgers, and the growth that is a regression."""

    band_ledgers: int = Field(default=DEFAULT_BAND_LEDGERS, gt=0, description="ledgers per band")
    threshold: float = Field(
        default=DEFAULT_THRESHOLD, gt=1, description="a range whose peak or seconds grew past this x regressed"
    )


@dg.asset(group_name="mission", partitions_def=missions_partitions_def, deps=["range_profile"], kinds={"parquet"})
def profile_diff(
    context: dg.AssetExecutionContext, config: ProfileDiffConfig, catchup: CatchupResource
) -> dg.MaterializeResult:
    """This mission's profile against the previous mission's, by ledger band whatever the cut of each
    (ranges matched by key, else by band: peaks maxed, seconds per ledger): peaks, time and memory
    requested, the ranges that regressed and new OOMs, and the stellar-core each ran."""
    mission = mission_partition(context)
    try:
        out = build_profile_diff(catchup.root(), mission, config.band_ledgers, config.threshold)
    except ValueError as exc:
        raise refused("profile_diff", exc) from None
    if out.diff is None:
        context.log.info(out.note)
    return dg.MaterializeResult(metadata=profile_diff_metadata(mission, out, catchup.memory_scale))

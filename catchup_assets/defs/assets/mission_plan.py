"""The mission_plan asset: a mission's ranges planned, sized and added as partitions (L34, L35).

Made per deployment (`build_mission_plan`): its config's defaults are the deployment's
(catchup_assets.defs.assets.launchpad), so the launchpad offers this deployment's grid.
"""

import dagster as dg

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.ranges import plan_ranges
from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.defs.assets.launchpad import (
    MissionPlanConfig,
    applied_order,
    check_limits,
    choose_profile,
    superseded,
)
from catchup_assets.defs.instance.ownership import RANGE_KEY, SUPERSEDED, has_history, latest_marks
from catchup_assets.defs.metadata.plan_metadata import plan_metadata
from catchup_assets.defs.mission.live_runs import holding, live_holders
from catchup_assets.defs.mission.mission_partitions import add_missions, unadopted
from catchup_assets.defs.mission.run_context import MISSION_TAG, ledger_ranges_partitions_def, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.plan import forecast_mission, prepare, uniform_forecast
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.profiles import ProfileRefused, ProfileUnavailable
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table
from catchup_assets.store.trusted import trust_label


def retire_superseded(context: dg.AssetExecutionContext, gone: list[str], keys: list[str], mission: str) -> list[str]:
    """Retire partitions a new plan supersedes (e.g. a partial tip that has grown); returns those deleted.

    A partition with history (another mission materialized, failed or condemned it) is
    kept and marked superseded, so its history stays in the UI; one without is deleted.
    """
    kept = has_history(context.instance, gone)
    for k in gone:
        if k not in kept:
            context.instance.delete_dynamic_partition(ledger_ranges_partitions_def.name, k)
            continue
        r = parse_key(k)
        by = [n for n in keys if parse_key(n).first <= r.last and r.first <= parse_key(n).last]
        context.log_event(
            dg.AssetObservation(
                asset_key=RANGE_KEY,
                partition=k,
                metadata={"kind": SUPERSEDED, "mission": mission, "superseded_by": dg.MetadataValue.json(by)},
            )
        )
    return [k for k in gone if k not in kept]


def check_not_live(instance: dg.DagsterInstance, existing: list[str], keys: list[str], mission: str) -> None:
    """Refuse a plan over ledgers a live range_catchup run of another mission holds: two missions
    would dispatch the same ranges at once."""
    for holder, hit in holding(live_holders(instance, existing), keys, mission):
        shown = ", ".join(hit[:3]) + (", ..." if len(hit) > 3 else "")
        raise ConfigError(
            f"mission: {mission} would dispatch over {len(hit)} ranges ({shown}) that {holder.who()} holds "
            f"in its live run {holder.run_id}; wait for it to finish, terminate it, or plan a span it does not cover"
        )


def plan_mission(
    context: dg.AssetExecutionContext, config: MissionPlanConfig, catchup: CatchupResource
) -> dg.MaterializeResult:
    """What the config schema cannot hold (a profile that exists, a span on the grid, the caps) is checked
    here, first, and refused naming the field; nothing is written before."""
    instance = context.instance
    try:
        choice = choose_profile(config.previous_profile, catchup.root())
        context.log.info(choice.why)
        prepared = prepare(config.to_mission(catchup, choice))
        cfg = prepared.config  # its lengths as applied: uniform when there was no profile to cut to
        existing = instance.get_dynamic_partitions(ledger_ranges_partitions_def.name)
        marked = {k for k, (kind, _) in latest_marks(instance, existing).items() if kind == SUPERSEDED}
        live = [k for k in existing if k not in marked]
        gone = superseded(live, prepared.keys)
        # A cut supersedes the grid ranges it cuts or merges by design; the cap guards the grid itself
        # (a typo'd first_ledger or ledgers_per_range), so it counts what the uniform grid would retire.
        grid_gone = gone if prepared.cut is None else superseded(live, [r.key for r in plan_ranges(cfg.span)])
        check_limits(config, catchup.mission_defaults, len(live), len(grid_gone))
        check_not_live(instance, existing, prepared.keys, cfg.mission)
    except ProfileUnavailable as exc:
        hint = ValueError(
            f"previous_profile: {exc}; none plans the mission unprofiled, latest takes the newest profile"
        )
        # The reason is the whole message: the cause's traceback would only bury it.
        raise refused("mission_plan config refused", hint) from None
    except ProfileRefused as exc:
        raise refused("mission_plan config refused", ValueError(f"previous_profile: {exc}")) from None
    except ValueError as exc:
        raise refused("mission_plan config refused", exc) from None
    if prepared.lengths_note:
        context.log.info(prepared.lengths_note)
    order = applied_order(cfg.order, prepared.previous.index is not None)
    if order != cfg.order:
        context.log.info(f"order {cfg.order}: {order}")
    if MISSION_TAG not in context.run.tags:  # launched from the UI: filtering runs by mission finds it
        instance.add_run_tags(context.run.run_id, {MISSION_TAG: cfg.mission})
    store = Store(cfg.storage_root)
    plan_url = write_table(store, layout.plan(cfg.mission), prepared.plan)
    save_mission(
        store,
        cfg,
        prepared.previous,
        core_image=catchup.core_image(),
        trusted=prepared.trusted,
        max_parallelism=catchup.mission_defaults.max_parallelism,  # no control raises the mission above it
    )
    deleted = retire_superseded(context, gone, prepared.keys, cfg.mission)
    present = set(instance.get_dynamic_partitions(ledger_ranges_partitions_def.name))
    # Ascending and once: a run covers a contiguous span in insertion order.
    new_keys = sorted(k for k in prepared.keys if k not in present)
    instance.add_dynamic_partitions(ledger_ranges_partitions_def.name, new_keys)
    # Its own view in the catalog, and the views of missions planned before missions were partitions.
    add_missions(instance, [cfg.mission, *unadopted(instance, store)])
    # The profile's notes (rows skipped, keys repeated, no profile) reach this run's log once, from the store's
    # own logger: every instance of ours manages catchup_assets' loggers (dagster.yaml, the chart's values).
    return dg.MaterializeResult(
        metadata={
            **plan_metadata(
                cfg,
                prepared,
                plan_url,
                new_keys,
                gone,
                deleted,
                forecast_mission(prepared),
                catchup.scale(),
                uniform_forecast(prepared),
            ),
            "previous_profile_choice": choice.why,
            "catchup_trust": trust_label(prepared.trusted),  # "verified against <file>, sha256 ..." or "untrusted"
            "order_applied": order,
        },
    )


def build_mission_plan(config_class: type[MissionPlanConfig]) -> dg.AssetsDefinition:
    """The mission_plan asset taking `config_class` (MissionPlanConfig with a deployment's defaults)."""

    @dg.asset(name="mission_plan", group_name="mission", kinds={"parquet"})
    def mission_plan(
        context: dg.AssetExecutionContext, config: config_class, catchup: CatchupResource
    ) -> dg.MaterializeResult:
        """The mission's ranges in dispatch order, each sized from the previous profile."""
        return plan_mission(context, config, catchup)

    return mission_plan


mission_plan = build_mission_plan(MissionPlanConfig)

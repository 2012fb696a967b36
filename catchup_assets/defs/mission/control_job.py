"""`mission_control_job`: pause, resume, drain or set the live parallelism of a mission from the launchpad.

It writes the same record as `catchup-assets control` (mission/control.py); every
dispatcher of the mission obeys it within two passes. A bad value (above the mission's
cap: the lower of its mission.json's and this deployment's max_parallelism), an unknown
mission or a resume of a finished one fails the run, naming the field, with nothing written.
"""

import re
from typing import Literal

import dagster as dg
from pydantic import Field

from catchup_assets.core.dispatch.mission_control import check_who
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MISSION_PATTERN
from catchup_assets.defs.mission.run_context import MISSION_TAG, newest_plan, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.control import set_control
from catchup_assets.store.control_record import ControlConflict

RANGE_CATCHUP_KEY = dg.AssetKey("range_catchup")
MISSION_NAME = re.compile(MISSION_PATTERN)


class MissionControlConfig(dg.Config):
    mission: str = Field(
        default="", description="the mission to control (its name, as planned); empty: the newest planned mission"
    )
    action: Literal["pause", "resume", "drain", "parallelism"] = Field(
        description="pause: no new attempts; resume: dispatch again; drain: finish what is in flight, then end "
        "the run, the rest left for later; parallelism: the live cap on attempts in flight (needs value)"
    )
    value: int | None = Field(default=None, description="parallelism: attempts in flight at once")


@dg.op(description="write the mission's control record and log its state after the change")
def set_mission_control(context: dg.OpExecutionContext, config: MissionControlConfig, catchup: CatchupResource):
    user = context.run.tags.get("dagster/user") or context.run.tags.get("user")
    mission = config.mission or newest_plan(context.instance)
    if not mission:
        raise dg.Failure(description="mission: none given and no mission planned yet", allow_retries=False)
    if not config.mission:
        context.log.info(f"mission: none given: the newest planned, {mission}")
    if MISSION_NAME.fullmatch(mission):  # before any refusal: filtering runs by mission finds it too (issue 46)
        context.instance.add_run_tags(context.run.run_id, {MISSION_TAG: mission})
    try:
        who = f"dagster:run {context.run.run_id[:8]}" + (f" ({check_who(user, 'dagster/user tag')})" if user else "")
        state = set_control(
            catchup.root(),
            mission,
            config.action,
            config.value,
            who=who,
            max_parallelism=catchup.mission_defaults.max_parallelism,
            retry=catchup.retry_policy(),
            cap_bytes=catchup.placement().ladder.cap_bytes,
        )
    except ConfigError as exc:
        raise refused(f"mission_control_job for mission {mission!r} refused", exc) from None
    except ControlConflict as exc:  # others kept changing it: nothing written, the operator launches again
        raise dg.Failure(description=f"mission_control_job for mission {mission!r}: {exc}") from None
    for line in state.lines():
        context.log.info(line)
    c = state.control
    context.log_event(
        dg.AssetObservation(
            asset_key=RANGE_CATCHUP_KEY,
            metadata={
                "mission": mission,
                "control": c.history[-1].line(),
                "paused": c.paused,
                "draining": c.drain,
                "live_parallelism": c.live_parallelism(state.planned_parallelism),
                "planned_parallelism": state.planned_parallelism,
                "done": state.done,
                "condemned": state.condemned,
                "in_flight": state.in_flight,
            },
        )
    )


@dg.job(description="pause, resume, drain or change the live parallelism of a running mission")
def mission_control_job():
    set_mission_control()

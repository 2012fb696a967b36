"""`notify_sensor`: a mission's news in Slack, once per event (issue 23).

It posts (dagster-slack's client, `defs/resources/slack.py`) to `slack_channel` when:
- a range_catchup run reports a stall (`not_stalled` failing, Z4) or its dispatch stopped
  (`dispatching` failing: the circuit breaker, a full backend; an operator's pause is not news);
- a mission becomes condemned-heavy: `slack_condemned_ranges` of its ranges condemned (its own
  condemned observations, kind `condemned`), once per mission;
- a range_catchup run of a mission ends (one that will be retried has not), with its
  summary: done, condemned (by that run), cost against the plan's prediction, makespan (first
  start to last end of its attempts, in mission hours) against the plan's forecast.

It is off, skipped with the reason, while no channel or no token is configured.

Nothing is sent twice for one event. The cursor holds the storage id of the newest
observation and run status change handled, and for each range_catchup run the newest health
evaluation read (run-local ids: the SQLite event log numbers each run's events apart) with
the verdict it gave; a run's repeat of a verdict (its last word at the end restates the
alert it raised while running) is no new event. A post that fails stops the tick: what was
sent is in the cursor, the rest goes at the next tick. An empty cursor reads from the
start of history, as the other sensors do.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import dagster as dg
from slack_sdk.errors import SlackClientError

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, HEALTH_STALL
from catchup_assets.core.dispatch.obey import PAUSED
from catchup_assets.defs.assets.range_assets import MISSION_TAG, PLAN_KEY, WILL_RETRY_TAG
from catchup_assets.defs.instance.ownership import CONDEMNED, RANGE_KEY
from catchup_assets.defs.mission.mission_end import ENDED_TAG, LEFT_TAG
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.resources.slack import TOKEN_ENV, CatchupSlack
from catchup_assets.defs.sensors.instance import BATCH, meta, targets_range_catchup
from catchup_assets.defs.sensors.mission_finished import finished_status_changes
from catchup_assets.mission.report import summarize, summary_paragraph
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table

LIVE = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
KEEP_MISSIONS = 200  # condemned-heavy missions remembered, newest last: the cursor stays small


@dataclass
class Cursor:
    status: int | None = None  # newest run status change handled
    observed: int | None = None  # newest range_catchup observation handled
    runs: dict[str, dict] = field(default_factory=dict)  # run id -> {"seen": id, "last": {check: why}}
    heavy: list[str] = field(default_factory=list)  # missions notified as condemned-heavy
    condemned: dict[str, list[str]] = field(default_factory=dict)  # mission -> its condemned ranges, below threshold

    @classmethod
    def parse(cls, text: str | None) -> Cursor:
        return cls(**json.loads(text)) if text else cls()

    def dump(self) -> str:
        self.heavy = self.heavy[-KEEP_MISSIONS:]
        return json.dumps(asdict(self), sort_keys=True)


class Notifier:
    """One tick's posts: each is sent, then recorded in the cursor, in that order."""

    def __init__(self, context: dg.SensorEvaluationContext, catchup: CatchupResource, slack: CatchupSlack):
        self.context, self.instance, self.catchup = context, context.instance, catchup
        self.client, self.store = slack.get_client(), Store(catchup.root())
        self.cursor = Cursor.parse(context.cursor)
        self.sent: list[str] = []

    def post(self, text: str) -> None:
        self.client.chat_postMessage(channel=self.catchup.slack_channel, text=text)
        self.sent.append(text)

    def health(self, run_ids: list[str]) -> None:
        """Each new failing health verdict of the runs, unless it restates the run's previous one."""
        for run_id in run_ids:
            state = self.cursor.runs.get(run_id, {"seen": -1, "last": {}})
            records = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
            for record in records.records:
                if record.storage_id <= state["seen"]:
                    continue
                evaluation = record.event_log_entry.dagster_event.event_specific_data
                check = evaluation.check_name
                why = evaluation.metadata["why"].value if "why" in evaluation.metadata else "no cause given"
                new = not evaluation.passed and state["last"].get(check) != why
                if new and check in (HEALTH_STALL, HEALTH_DISPATCH) and not why.startswith(PAUSED):
                    mission = meta_of(evaluation, "mission") or "?"
                    what = "stalled" if check == HEALTH_STALL else "dispatch stopped"
                    reason = why.removeprefix(f"{what}: ")  # the stall's verdict starts "stalled: " itself
                    self.post(f"mission {mission}: {what}: {reason} (run {run_id})")
                state["last"][check] = None if evaluation.passed else why
                state["seen"] = record.storage_id
                self.cursor.runs[run_id] = state

    def condemned(self) -> None:
        """Each mission whose condemned ranges reach `slack_condemned_ranges`, once: counted from its own
        condemned observations (the ranges' marks move on when a later mission condemns them too)."""
        records = self.instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=RANGE_KEY, after_storage_id=self.cursor.observed),
            limit=BATCH,
            ascending=True,
        ).records
        threshold = self.catchup.slack_condemned_ranges
        for record in records:
            mission = meta_obs(record, "mission")
            if meta_obs(record, "kind") != CONDEMNED or not mission or mission in self.cursor.heavy:
                continue
            keys = sorted({*self.cursor.condemned.get(mission, []), record.partition_key})
            if len(keys) >= threshold:
                shown = ", ".join(keys[:5]) + (", ..." if len(keys) > 5 else "")
                self.post(
                    f"mission {mission}: condemned-heavy: {len(keys)} ranges condemned "
                    f"(threshold {threshold}): {shown}; backfill them once the cause is fixed"
                )
                self.cursor.heavy.append(mission)
                self.cursor.condemned.pop(mission, None)
            else:
                self.cursor.condemned[mission] = keys  # fewer than the threshold: the cursor stays small
        if records:
            self.cursor.observed = records[-1].storage_id

    def ended(self, event: dg.EventLogRecord, run: dg.DagsterRun | None) -> None:
        """A range_catchup run's end, with its mission's summary; any other run's is passed over."""
        if run is not None and targets_range_catchup(self.instance, run):
            mission = run.tags.get(MISSION_TAG)
            kind = event.event_log_entry.dagster_event_type
            if mission and run.tags.get(WILL_RETRY_TAG) != "true":  # a run retried has not ended its mission
                how = {dg.DagsterEventType.RUN_SUCCESS: "succeeded", dg.DagsterEventType.RUN_CANCELED: "was stopped"}
                how = how.get(kind, "failed")
                if run.tags.get(ENDED_TAG) in ("drained", "stopped"):  # issue 36: canceled by a drain or a stop
                    how += f" ({run.tags[ENDED_TAG]}, {run.tags.get(LEFT_TAG, '?')} ranges left)"
                summary = self.summary(mission, run.run_id)
                self.post(f"mission {mission} ended: its range_catchup run {run.run_id} {how}. {summary}")
            self.cursor.runs.pop(run.run_id, None)
        self.cursor.status = event.storage_id

    def summary(self, mission: str, run_id: str) -> str:
        try:
            records, done = RecordStore(self.store, mission).load()
            plan = read_table(self.store, layout.plan(mission)).to_pylist()
        except (OSError, ValueError) as exc:  # the summary is a courtesy: the end is still news
            return f"(no summary: {exc})"
        finished = [r for ident, r in records.items() if ident in done]
        condemned = len(self.condemned_by_run(run_id))
        scale = self.catchup.scale()
        s = summarize(mission, finished, self.catchup.placement(), len(plan), condemned, scale.time, plan)
        return summary_paragraph(s, self.forecast_hours(mission), scale.time)

    def condemned_by_run(self, run_id: str) -> set[str]:
        """The ranges the run condemned: its own observations, whatever later runs did to the marks."""
        records = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION).records
        return {r.partition_key for r in records if meta_obs(r, "kind") == CONDEMNED}

    def forecast_hours(self, mission: str) -> float | None:
        """The predicted makespan on the mission's newest plan (production hours), if it predicted one."""
        plans = self.instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=PLAN_KEY), limit=BATCH).records
        mine = [r for r in plans if meta(r, "mission") == mission]
        return meta(mine[0], "predicted_makespan_hours") if mine else None


def meta_of(evaluation, name: str):
    value = evaluation.metadata.get(name)
    return None if value is None else value.value


def meta_obs(record: dg.EventLogRecord, name: str):
    value = record.asset_observation.metadata.get(name) if record.asset_observation else None
    return None if value is None else value.value


@dg.sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Post a mission's stalls, stopped dispatch, condemned-heavy ranges and ends to Slack.",
)
def notify_sensor(context: dg.SensorEvaluationContext, catchup: CatchupResource, slack: CatchupSlack):
    """Post a mission's stalls, stopped dispatch, condemned-heavy ranges and ends to Slack, once each."""
    if not catchup.slack_channel:
        return dg.SkipReason("notifications off: no slack_channel in the catchup resource")
    if not slack.token:
        return dg.SkipReason(f"notifications off: no Slack token (${TOKEN_ENV})")
    n = Notifier(context, catchup, slack)
    instance = context.instance
    ends = [(e, instance.get_run_by_id(e.run_id)) for e in finished_status_changes(instance, n.cursor.status)]
    live = instance.get_run_records(filters=dg.RunsFilter(statuses=LIVE))
    runs = [r.dagster_run for r in live] + [run for _, run in ends if run is not None]
    mine = [r.run_id for r in runs if targets_range_catchup(instance, r)]
    try:
        n.health(list(dict.fromkeys([*n.cursor.runs, *mine])))
        n.condemned()
        for event, run in ends:  # after its health and its marks: the end is a run's last news
            n.ended(event, run)
    except (SlackClientError, OSError) as exc:
        context.log.warning(f"Slack did not take a notification ({exc}): the rest are posted next tick")
    return dg.SensorResult(skip_reason=f"{len(n.sent)} notifications posted", cursor=n.cursor.dump())

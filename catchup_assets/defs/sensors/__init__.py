"""Sensors that move a mission along: plan -> catchup runs -> profile -> next mission.

- `mission_plan_sensor`: each new `mission_plan` becomes `range_catchup_job` runs
  over the plan's keys, one run per contiguous group of keys in the partition
  set's insertion order (a run covers one contiguous span of that order).
- `mission_finished_sensor`: each finished (success or failure) run that
  targeted `range_catchup` becomes one `profile_job` run for its mission.
- `next_mission_sensor` (stopped by default): the newest new `range_profile` plans
  the next mission from it (older new ones are superseded; one mission at a time),
  named after the previous one with a sequence (`m1` -> `m1-n2`), unless that mission
  was drained, stopped or condemned ranges (`mission_health.py`; `allow_after_failure`
  plans anyway), longest ranges first, up to the tip `CatchupResource.tip_source`
  gives (a fixed ledger, or an archive's root HAS `currentLedger`; L38), else over the
  previous mission's span. A tip that cannot be read skips the tick, the cursor held
  just before that profile, so the next tick tries again.
- `notify_sensor`: a range_catchup run's stall or stopped dispatch, a mission's
  condemned-heavy ranges and each run's end (with the mission's summary) posted to
  Slack once each (`notify.py`); skipped, saying why, while no channel or token is set.

Cursors are storage ids of the newest event handled (a materialization, or a
run's success/failure event), so a second evaluation with the returned cursor
requests nothing. An empty cursor reads from the start of history; run keys let
the daemon drop whatever was already launched should a cursor be reset.

A partial tip superseded by a later mission: ranges sit on a fixed grid, so
only the tip key changes as the tip grows (`0025000961-0025600960` becomes
`0025000961-0026250240`). `mission_plan` retires superseded keys
(`retire_superseded` in defs/assets/mission_plan.py) before adding its own, so the partition set
never holds both. Runs are per contiguous group of the plan's keys as the
partition set stands when `mission_plan_sensor` evaluates: a plan whose tip has
since been retired runs without it (logged), and the later plan's runs cover
only live keys. A run already in flight over the retired key keeps its records
(its profile still measures that range, looked up by ledger); a run still queued
whose range ends on it fails at start, as Dagster no longer knows the key: the
newer mission covers those ledgers. Replanning the same mission name over the
same ranges launches nothing new (same run keys): retry through a UI backfill.
"""

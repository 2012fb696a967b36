"""A mission's own page in the UI: its counts and time to go while it runs, and how it ended (issue 36 item 2).

Dagster's range_catchup partitions view counts every mission's greens ("Materialized (94)" when this
mission had done 8), and a run shows no progress of its own. So a range_catchup run writes its mission's
figures where an operator looks, from the dispatcher's status (`on_status`), at most every
`every_seconds` and once at its end:
- an `AssetObservation` of `range_profile`'s partition named after the mission, the page a mission's
  profile lands on: `/assets/range_profile?view=events&partition=<mission>` shows the newest one. Its
  `mission_page` entry is that page's link, in the run's log too: one click from the run. (Dagster's
  own "View Asset" link on the row opens the asset, not the partition's events.) A relative link:
  the run does not know the UI's address, and the UI resolves it against its own;
  its `console` entry, when the deployment names the mission console (`console_url`), the mission there;
- the run's tag `catchup/progress`, the same in one line, in the runs list and on the run's page.
The figures are this run's only (its ranges), never another mission's. A change of the operator's
control (pause, drain, parallelism) is written at once, not at the next `every_seconds`.
"""

from __future__ import annotations

from urllib.parse import urlencode

import dagster as dg

from catchup_assets.core.dispatch.results import Status
from catchup_assets.core.forecast.time_to_go import TimeToGo
from catchup_assets.defs.mission.mission_partitions import add_missions

PROGRESS_TAG = "catchup/progress"
CONSOLE_TAG = "catchup/console"  # the mission's page in the console (issue 46), when the deployment names one
PROFILE_KEY = dg.AssetKey("range_profile")
EVERY_SECONDS = 30.0


def to_go_metadata(to_go: TimeToGo | None) -> dict:
    """The time to go and its band in wall-clock seconds (as /metrics' gauge), and the status line's words."""
    if to_go is None or not to_go.left or not to_go.known:
        return {"time_to_go": to_go.line() if to_go is not None else "not estimated yet"}
    return {
        "time_to_go": to_go.line(),
        "time_to_go_seconds": round(to_go.expected_seconds, 1),
        "time_to_go_p10_seconds": round(to_go.p10_seconds, 1),
        "time_to_go_p90_seconds": round(to_go.p90_seconds, 1),
    }


def running_metadata(mission: str, status: Status) -> dict:
    """The page's figures while the mission runs."""
    held = status.control.split(",")[0] if status.control else ""
    return {
        "mission": mission,
        "state": held if held in ("paused", "draining") else "running",  # mission_control.py's words
        "control": status.control or "no control record read yet",
        "progress": f"{status.completed} of {status.total} done",
        "done": status.completed,
        "running": status.running,
        "pending": status.pending,
        "queued": status.queued,
        "condemned": status.condemned,
        "ranges": status.total,
        **to_go_metadata(status.to_go),
    }


def running_tag(status: Status) -> str:
    s = (
        f"{status.completed}/{status.total} done, {status.running} running, {status.pending} pending, "
        f"{status.queued} queued, {status.condemned} condemned"
    )
    to_go = status.to_go
    return s + (f"; {to_go.line()}" if to_go is not None and to_go.left and to_go.known else "")


def ended_metadata(mission: str, how: str, why: str, n: dict[str, int]) -> dict:
    """The page's figures once the run ended: how (mission_end.py's words) and what is left."""
    return {
        "mission": mission,
        "state": f"ended: {how}",
        "progress": f"{n['done']} of {n['ranges']} done",
        "why": why,
        **n,
        "left": n["ranges"] - n["done"],
        "time_to_go": "ended",
    }


def page_link(mission: str) -> str:
    """The mission page's path in the UI: range_profile's events, of the mission's partition."""
    return "/assets/range_profile?" + urlencode({"view": "events", "partition": mission})


class MissionPage:
    """Writes one run's figures to its mission's page, throttled by `clock` (its `time()`, in seconds)."""

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        mission: str,
        clock,
        every_seconds: float = EVERY_SECONDS,
        console_url: str | None = None,
    ):
        """`console_url`: the mission's page in the console (CatchupResource.console_mission_url), or None."""
        self.context, self.mission, self.clock, self.every_seconds = context, mission, clock, every_seconds
        self.console_url = console_url
        self._at: float | None = None
        self._control: str | None = None  # the control in force when last written
        add_missions(context.instance, [mission])  # a mission planned before missions were partitions
        if console_url is not None:  # on the run's page and in the runs list, from the run's start
            context.instance.add_run_tags(context.run.run_id, {CONSOLE_TAG: console_url})

    def running(self, status: Status) -> None:
        now = self.clock.time()
        if self._at is not None and now - self._at < self.every_seconds and status.control == self._control:
            return
        self._at, self._control = now, status.control
        self._write(running_metadata(self.mission, status), running_tag(status))

    def ended(self, how: str, why: str, n: dict[str, int]) -> None:
        self._write(ended_metadata(self.mission, how, why, n), why)

    def terminated(self) -> None:
        why = "terminated from the UI: the attempts in flight stopped; the ranges left resume in a later run"
        self._write({"mission": self.mission, "state": "ended: terminated", "why": why, "time_to_go": "ended"}, why)

    def _write(self, metadata: dict, tag: str) -> None:
        context = self.context
        context.instance.add_run_tags(context.run.run_id, {PROGRESS_TAG: tag})
        link = {"mission_page": dg.MetadataValue.url(page_link(self.mission))}
        if self.console_url is not None:
            link["console"] = dg.MetadataValue.url(self.console_url)
        context.log_event(
            # The link first: a log row shows the top of a long table, the rest behind "View full message".
            dg.AssetObservation(asset_key=PROFILE_KEY, partition=self.mission, metadata={**link, **metadata})
        )

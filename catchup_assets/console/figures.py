"""What the console shows, as plain JSON-ready dicts: read from the records `catchup-assets status` reads.

No second source of truth: a mission's figures are mission/mission_status.py's (its ranges by
state, its time to go, its control) and the cap mission/saved.py's; a range's attempt chain is
the records' and its log mission/logs.py's. The pages and `/api/...` serve these same dicts, so
the page and the API can never disagree. Names arrive already checked (console/app.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict
from urllib.parse import urlencode

from catchup_assets.core.dispatch.ports import LiveLogs, LogUnavailable
from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.mission.logs import attempt_log
from catchup_assets.mission.mission_status import RANGE_STATES, MissionStatus, mission_status
from catchup_assets.mission.saved import mission_cap, planned_missions
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table

LOG_TAIL_LINES = 200  # as `catchup-assets logs` prints by default
LOG_LIMIT_BYTES = 256 * 1024  # a page, not a download


class NotFound(ConfigError):
    """A mission or range the storage root does not hold (the API's 404)."""


def require_mission(store: Store, mission: str) -> None:
    """`mission` (a checked name) is planned on this root, else NotFound naming where its plan should be."""
    if not planned_missions(store, [mission]):
        raise NotFound(f"mission {mission!r} has no plan at {store.url(layout.plan(mission))}")


def require_range(store: Store, mission: str, range_key: str) -> None:
    """`range_key` (a checked key) is one of the mission's planned ranges, else NotFound."""
    require_mission(store, mission)
    keys = read_table(store, layout.plan(mission)).column("range_key").to_pylist()
    if range_key not in keys:
        raise NotFound(f"range: mission {mission} has no range {range_key} in its plan")


class NoLiveLogs:
    """The LiveLogs port for a console given no backend: every attempt's log is its archive, and a
    running attempt's says it is not archived yet."""

    def read_log(self, range_key, attempt, follow=False, tail_lines=None, limit_bytes=None) -> Iterator[str] | None:
        return None


def _phase(status: MissionStatus) -> str:
    """One word for the mission's standing: status's (records, control record, the last run's end)."""
    return status.phase


def _to_go(status: MissionStatus) -> dict:
    t = status.to_go
    return {
        "line": t.line(),
        "left": t.left,
        "known": t.known,
        "expected_seconds": t.expected_seconds if t.known else None,
        "p10_seconds": t.p10_seconds if t.known else None,
        "p90_seconds": t.p90_seconds if t.known else None,
        "pace": t.pace,
    }


def mission_summary(root: str, mission: str, now: float) -> dict:
    """One row of the missions list: its standing, done/total, time to go and band, first start."""
    require_mission(Store(root), mission)
    return _summary(mission_status(root, mission, now))


def _summary(status: MissionStatus) -> dict:
    s = status.state
    return {
        "mission": s.mission,
        "phase": _phase(status),
        "done": s.done,
        "total": s.ranges,
        "condemned": s.condemned,
        "started_at": status.started_at,
        "to_go": _to_go(status),
        "cost_so_far": None,  # not in the status records yet (issue 46 item 2: a later session's)
    }


def missions(root: str, now: float) -> list[dict]:
    """Every mission planned on the root, by name. One whose records cannot be read (a mission.json or
    control record of the wrong shape, a file that cannot be opened) is listed `unreadable` with why,
    and the others as ever: one bad mission must not take the list away."""
    out = []
    for name in planned_missions(Store(root)):
        try:
            out.append(mission_summary(root, name, now))
        except (ConfigError, StateError, OSError) as exc:
            out.append({"mission": name, "phase": "unreadable", "error": str(exc)})
    return out


def mission_figures(root: str, mission: str, now: float) -> dict:
    """One mission's page: the summary, per-state counts, every range's state in dispatch order, the
    live and planned parallelism, the cap a change may not pass, and the control record's history."""
    require_mission(Store(root), mission)
    status = mission_status(root, mission, now)
    s, c = status.state, status.state.control
    cap = mission_cap(Store(root), mission)
    counts = dict.fromkeys(RANGE_STATES, 0)
    for state in status.states.values():
        counts[state] += 1
    return {
        **_summary(status),
        "counts": counts,
        "ranges": [[key, state] for key, state in status.states.items()],
        "parallelism": {"live": status.live, "planned": s.planned_parallelism},
        "cap": {"limit": cap.limit, "where": cap.where},
        "control": {
            "paused": c.paused,
            "drain": c.drain,
            "parallelism": c.parallelism,
            "history": [asdict(change) for change in c.history],
        },
        "status_lines": status.lines(),
    }


RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # a Dagster run id


def dagster_links(dagster_url: str | None, range_key: str, attempts: list[dict]) -> dict:
    """Where the Dagster UI at `dagster_url` shows this range: its partition of range_catchup and the runs
    that dispatched its attempts (each claim's holder that is a Dagster run id), newest first; {} without a URL."""
    if dagster_url is None:
        return {}
    runs = []
    for a in reversed(attempts):
        holder = a.get("holder")
        if isinstance(holder, str) and RUN_ID.fullmatch(holder) and holder not in runs:
            runs.append(holder)
    return {
        "partition": f"{dagster_url}/assets/range_catchup?{urlencode({'partition': range_key})}",
        "runs": [{"run_id": r, "url": f"{dagster_url}/runs/{r}"} for r in runs],
    }


def range_figures(root: str, mission: str, range_key: str, live: LiveLogs | None = None) -> dict:
    """One range's attempt chain, oldest first, and its newest attempt's log (its tail): from `live`, its
    backend, while the attempt runs there (`source` "live"); else its archive."""
    store = Store(root)
    require_range(store, mission, range_key)
    book = RecordStore(store, mission)
    records, done, _ = book.load_range(range_key)
    # The claim's holder is the Dagster run that dispatched the attempt (range_catchup_run.py), the CLI's own otherwise.
    attempts = [
        {**asdict(records[n]), "done": n in done, "holder": book.claim_holder(range_key, n)} for n in sorted(records)
    ]
    log: dict = {"attempt": None, "source": None, "lines": [], "unavailable": None}
    if records:
        try:
            found = attempt_log(
                root,
                mission,
                range_key,
                live or NoLiveLogs(),
                tail_lines=LOG_TAIL_LINES,
                limit_bytes=LOG_LIMIT_BYTES,
            )
            log = {"attempt": found.attempt, "source": found.source, "lines": list(found.lines), "unavailable": None}
        except LogUnavailable as exc:
            log = {"attempt": max(records), "source": None, "lines": [], "unavailable": str(exc)}
    return {"mission": mission, "range": range_key, "attempts": attempts, "log": log}

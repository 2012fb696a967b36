"""Every path under the storage root, per mission: the layout, written once (docs/storage.md).

Each function returns a path relative to the root (Store.path and Store.url
make it absolute):

    <mission>/mission.json                          the mission's own settings (mission/saved.py)
    <mission>/plan.parquet                          the plan (core/plan/plan_table.py)
    <mission>/control.json                          an operator's control: pause, drain, parallelism
                                                    (core/dispatch/mission_control.py, store/control_record.py)
    <mission>/run_end.json                          how the last run ended, and when (store/run_end.py)
    <mission>/previous_profile.parquet              the plan's copy of the profile it was sized from
    <mission>/trusted_hashes.json                   the plan's copy of its trusted checkpoint hashes
                                                    (store/trusted.py), what every range checks against
    <mission>/attempts/<range_key>/a<NNN>.parquet   the attempt record (store/records.py)
    <mission>/attempts/<range_key>/_a<NNN>.done     written after the record (L32); the
                                                    underscore keeps Parquet readers off it
    <mission>/attempts/<range_key>/_claim-a<NNN>    a dispatcher's claim on the attempt
    <mission>/attempts/<range_key>/_reset-a<NNN>    a new run of a condemned range: budgets count after NNN
    <mission>/logs/<range_key>/a<NNN>.log.gz        the attempt's log
    <mission>/attempt_records.parquet               every done attempt in one table: a
                                                    snapshot, never the source of truth
    <mission>/attempt_segments/s<ns>-<id>.parquet   done attempts appended since the snapshot's
                                                    last compaction (store/snapshot_log.py)
    <mission>/range_profile.parquet                 the profile (core/aggregate/profile_table.py)
    <mission>/tier_map.parquet                      the tier map (core/forecast/tier_map.py)
    <mission>/tier_ladder.yaml                      the fitted ladder as chart values (core/forecast/fit.py)
    <mission>/profile_diff.parquet                  the profile against the one it was sized from
                                                    (core/aggregate/band_diff.py)
"""

from __future__ import annotations

MISSION_FILE = "mission.json"
PLAN_FILE = "plan.parquet"
CONTROL_FILE = "control.json"
RUN_END_FILE = "run_end.json"
PREVIOUS_PROFILE_FILE = "previous_profile.parquet"
TRUSTED_HASHES_FILE = "trusted_hashes.json"
ATTEMPTS_DIR = "attempts"
LOGS_DIR = "logs"
SNAPSHOT_FILE = "attempt_records.parquet"
SEGMENTS_DIR = "attempt_segments"
PROFILE_FILE = "range_profile.parquet"
TIER_MAP_FILE = "tier_map.parquet"
TIER_LADDER_FILE = "tier_ladder.yaml"
PROFILE_DIFF_FILE = "profile_diff.parquet"


def mission_file(mission: str) -> str:
    return f"{mission}/{MISSION_FILE}"


def plan(mission: str) -> str:
    return f"{mission}/{PLAN_FILE}"


def control(mission: str) -> str:
    return f"{mission}/{CONTROL_FILE}"


def run_end(mission: str) -> str:
    return f"{mission}/{RUN_END_FILE}"


def previous_profile(mission: str) -> str:
    return f"{mission}/{PREVIOUS_PROFILE_FILE}"


def trusted_hashes(mission: str) -> str:
    return f"{mission}/{TRUSTED_HASHES_FILE}"


def attempts(mission: str, range_key: str | None = None) -> str:
    """Every attempt file of the mission, or of one of its ranges."""
    return f"{mission}/{ATTEMPTS_DIR}" if range_key is None else f"{mission}/{ATTEMPTS_DIR}/{range_key}"


def attempt_file(mission: str, range_key: str, attempt: int, ext: str) -> str:
    """The attempt's record (`parquet`) or its done mark (`done`, underscored)."""
    mark = "_" if ext == "done" else ""
    return f"{attempts(mission, range_key)}/{mark}a{attempt:03d}.{ext}"


def claim(mission: str, range_key: str, attempt: int) -> str:
    return f"{attempts(mission, range_key)}/_claim-a{attempt:03d}"


def reset(mission: str, range_key: str, after_attempt: int) -> str:
    return f"{attempts(mission, range_key)}/_reset-a{after_attempt:03d}"


def log(mission: str, range_key: str, attempt: int) -> str:
    return f"{mission}/{LOGS_DIR}/{range_key}/a{attempt:03d}.log.gz"


def snapshot(mission: str) -> str:
    return f"{mission}/{SNAPSHOT_FILE}"


def segments(mission: str) -> str:
    return f"{mission}/{SEGMENTS_DIR}"


def segment(mission: str, name: str) -> str:
    return f"{segments(mission)}/{name}.parquet"


def profile(mission: str) -> str:
    return f"{mission}/{PROFILE_FILE}"


def tier_map(mission: str) -> str:
    return f"{mission}/{TIER_MAP_FILE}"


def tier_ladder(mission: str) -> str:
    return f"{mission}/{TIER_LADDER_FILE}"


def profile_diff(mission: str) -> str:
    return f"{mission}/{PROFILE_DIFF_FILE}"

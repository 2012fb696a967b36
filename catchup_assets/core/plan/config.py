"""A mission's settings as one value: what it covers and the policies it runs under.

The dispatcher, the planner and the Dagster assets all take this value; each
setting has its one default here and is validated here, once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.ranges import LENGTHS, ORDERS, MissionSpan
from catchup_assets.core.size.sizing import Placement

# Attempts in flight at once, across every run of the mission (the seed ran 1000-2096).
DEFAULT_PARALLELISM = 1000
PROFILE_TIMEOUT_SECONDS = 60.0  # a server that never answers, or drips, must not hold a launch
# A DNS-1123 label of <= 40 characters; the launchpad's config class carries the same pattern.
MISSION_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"
MISSION_RULE = "1-40 lowercase letters, digits and '-', starting and ending with a letter or digit"
_MISSION_RE = re.compile(MISSION_PATTERN)


# What each attempt of a verified mission is handed (core/dispatch/claims.py, entrypoint.sh).
TRUSTED_ENV = frozenset({"CATCHUP_TRUSTED_LEDGER", "CATCHUP_TRUSTED_HASH"})


def validate_mission(name: str) -> str:
    """Mission names go into paths and Kubernetes labels: DNS-1123 label, <= 40 chars."""
    if not isinstance(name, str) or not _MISSION_RE.match(name):
        raise ConfigError(f"mission name {name!r} is invalid: use {MISSION_RULE}")
    return name


def check_dispatch_settings(
    poll_seconds: float,
    status_every: int,
    profile_timeout_seconds: float,
    stall_seconds: float,
    stall_factor: float,
    breaker_attempts: int,
) -> None:
    """The dispatcher's settings, refused naming the field: durations finite and > 0, counts integers.

    MissionConfig checks them; so does CatchupResource at load, where they are set, so `poll_seconds: NaN`
    is refused before a mission_plan run rather than at it (L34).
    """
    durations = (("poll_seconds", poll_seconds), ("profile_timeout_seconds", profile_timeout_seconds))
    for name, value in (*durations, ("stall_seconds", stall_seconds)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
            raise ConfigError(f"{name} must be > 0 and finite, got {value!r}")
    factor = stall_factor
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 <= factor < float("inf"):
        raise ConfigError(f"stall_factor must be >= 1 and finite, got {factor!r}")
    for name, value, low in (("status_every", status_every, 1), ("breaker_attempts", breaker_attempts, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}{' (0: off)' if not low else ''}, got {value!r}")


@dataclass(frozen=True)
class MissionConfig:
    mission: str
    span: MissionSpan
    storage_root: str
    parallelism: int = DEFAULT_PARALLELISM
    order: str = "tip-first"
    previous_profile: str | None = None
    # Set when the mission was planned: the previous profile must still be exactly that file.
    previous_profile_sha256: str | None = None
    retry: RetryPolicy = RetryPolicy()
    placement: Placement = Placement()
    deadline_seconds: int | None = None
    poll_seconds: float = 1.0
    status_every: int = 30  # passes between status lines: thin, not a line per pod (L36)
    env: Mapping[str, str] = field(default_factory=dict)
    profile_timeout_seconds: float = PROFILE_TIMEOUT_SECONDS  # connect and total, a profile over http(s)
    # An attempt is overdue past stall_factor x its profiled seconds, and never before
    # stall_seconds (the whole threshold for an unprofiled range); the mission has stalled
    # (Z4) when nothing completed for stall_seconds and every attempt in flight is overdue.
    stall_seconds: float = 3600.0
    stall_factor: float = 2.0
    # Circuit breaker: this many finished attempts in a row failing with one signature
    # (outcome, exit code, stellar-core's last error) pause dispatch with that cause;
    # those ranges' budgets are not spent. 0: off.
    breaker_attempts: int = 5
    # stellar-core verify-checkpoints output (a path or URL): every range's catchup is checked
    # against it (each attempt its range's one hash: entrypoint.sh). None: untrusted, as
    # stellar-core warns.
    trusted_hashes: str | None = None
    # How the span is cut (LENGTHS): uniform, or cut to the previous profile for `parallelism`
    # slots; a backfill runs the saved plan's ranges, never a new cut.
    lengths: str = "uniform"

    def __post_init__(self) -> None:
        validate_mission(self.mission)
        if self.order not in ORDERS:
            raise ConfigError(f"order: unknown order {self.order!r}: choose one of {', '.join(ORDERS)}")
        if self.lengths not in LENGTHS:
            raise ConfigError(f"lengths: unknown {self.lengths!r}: choose one of {', '.join(LENGTHS)}")
        if self.parallelism < 1:
            raise ConfigError(f"parallelism must be >= 1, got {self.parallelism}")
        check_dispatch_settings(
            self.poll_seconds,
            self.status_every,
            self.profile_timeout_seconds,
            self.stall_seconds,
            self.stall_factor,
            self.breaker_attempts,
        )
        if self.deadline_seconds is not None and self.deadline_seconds < 1:
            raise ConfigError(f"deadline_seconds must be >= 1, got {self.deadline_seconds}")
        if taken := sorted(TRUSTED_ENV & set(self.env)):
            raise ConfigError(f"env {taken[0]} is set by the dispatcher from trusted_hashes, not by hand")

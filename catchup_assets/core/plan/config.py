"""A mission's settings as one value: what it covers and the policies it runs under.

The dispatcher, the planner and the Dagster assets all take this value; each
setting has its one default here and is validated here, once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.errors import ConfigError, bounded, check_bounds, check_value, declared_bounds, integer_fields
from catchup_assets.core.plan.cut import DEFAULT_NODE_HOURS_CAP
from catchup_assets.core.plan.ranges import LENGTHS, MissionSpan
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB, MiB
from catchup_assets.core.values.ledger_range import ORDERS

# Attempts in flight at once, across every run of the mission (the seed ran 1000-2096).
DEFAULT_PARALLELISM = 1000
# No more than Kubernetes' tested limit of pods in one cluster: a range's attempt is a pod
# (kubernetes.io/docs/setup/best-practices/cluster-large/, "no more than 150,000 total pods").
MAX_PARALLELISM = 150_000
# The longest any one duration setting may be (issue 45 item 5): a week, past every range's ~6 h.
MAX_DURATION_SECONDS = 7 * 24 * 3600
PROFILE_TIMEOUT_SECONDS = 60.0  # a server that never answers, or drips, must not hold a launch
# A previous profile is read to at most this many bytes and rows, or refused (issue 45 item 3): a server that streams
# forever, /dev/zero or a 10^6-row table must not fill the plan's memory. A real profile is ~4000-6000 rows, ~0.3 MB.
PROFILE_MAX_BYTES = 256 * MiB
PROFILE_MAX_ROWS = 200_000
# A DNS-1123 label of <= 40 characters; the launchpad's config class carries the same pattern. Checked
# with fullmatch: `$` alone also passes "m1\n", and a name with a newline would become a directory.
MISSION_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"
MISSION_RULE = "1-40 lowercase letters, digits and '-', starting and ending with a letter or digit"
_MISSION_RE = re.compile(MISSION_PATTERN)


# What each attempt of a verified mission is handed (core/dispatch/claims.py, entrypoint.sh).
TRUSTED_ENV = frozenset({"CATCHUP_TRUSTED_LEDGER", "CATCHUP_TRUSTED_HASH"})


def validate_mission(name: str) -> str:
    """Mission names go into paths and Kubernetes labels: DNS-1123 label, <= 40 chars."""
    if not isinstance(name, str) or not _MISSION_RE.fullmatch(name):
        raise ConfigError(f"mission name {name!r} is invalid: use {MISSION_RULE}")
    return name


# The dispatcher's settings, each also a CatchupResource field (defs/resources/resource.py).
DISPATCH_SETTINGS = (
    "poll_seconds", "status_every", "profile_timeout_seconds", "profile_max_bytes", "profile_max_rows",
    "stall_seconds", "stall_factor", "breaker_attempts",
)  # fmt: skip


def check_dispatch_settings(settings: Mapping[str, object]) -> None:
    """The dispatcher's settings (DISPATCH_SETTINGS, by name), each refused naming it past the bounds
    MissionConfig declares for it, NaN and infinity included.

    MissionConfig checks them; so does CatchupResource at load, where they are set, so `poll_seconds: NaN`
    is refused before a mission_plan run rather than at it (L34). Its fields, and with them the chart's
    values schema, carry the same bounds (defs/resources/resource.py).
    """
    assert set(settings) == set(DISPATCH_SETTINGS), sorted(settings)
    for name, value in settings.items():
        check_value(name, value, declared_bounds(MissionConfig, name), name in integer_fields(MissionConfig))


@dataclass(frozen=True)
class MissionConfig:
    mission: str
    span: MissionSpan
    storage_root: str
    parallelism: int = bounded(DEFAULT_PARALLELISM, ge=1, le=MAX_PARALLELISM)
    order: str = "tip-first"
    previous_profile: str | None = None
    # Set when the mission was planned: the previous profile must still be exactly that file.
    previous_profile_sha256: str | None = None
    # The environment variable holding the previous profile's credentials (store/credentials.py):
    # a name, read as the profile is read; the credentials are never a field of anything kept.
    previous_profile_secret_env: str | None = None
    retry: RetryPolicy = RetryPolicy()
    placement: Placement = Placement()
    # Upper bounds (issue 45 item 5), each a sanity line past which a value is a typo: a week for
    # any duration but a pass's, an hour between passes, no breaker past 10^5 failures.
    deadline_seconds: int | None = bounded(None, ge=1, le=MAX_DURATION_SECONDS)
    poll_seconds: float = bounded(1.0, gt=0, le=3600)
    # Passes between status lines: thin, not a line per pod (L36); 10**9: never, in practice (the benchmarks').
    status_every: int = bounded(30, ge=1, le=10**9)
    env: Mapping[str, str] = field(default_factory=dict)
    # Connect and total, a profile over http(s).
    profile_timeout_seconds: float = bounded(PROFILE_TIMEOUT_SECONDS, gt=0, le=3600)
    # The most bytes and rows of a previous profile read (local, http(s), object store); past either it is refused.
    profile_max_bytes: int = bounded(PROFILE_MAX_BYTES, ge=1, le=16 * GiB)
    profile_max_rows: int = bounded(PROFILE_MAX_ROWS, ge=1, le=100_000_000)
    # An attempt is overdue past stall_factor x its profiled seconds, and never before
    # stall_seconds (the whole threshold for an unprofiled range); the mission has stalled
    # (Z4) when nothing completed for stall_seconds and every attempt in flight is overdue.
    stall_seconds: float = bounded(3600.0, gt=0, le=MAX_DURATION_SECONDS)
    stall_factor: float = bounded(2.0, ge=1, le=1000)
    # Circuit breaker: this many finished attempts in a row failing with one signature
    # (outcome, exit code, stellar-core's last error) pause dispatch with that cause;
    # those ranges' budgets are not spent. 0: off.
    breaker_attempts: int = bounded(5, ge=0, le=100_000)  # 0: off
    # stellar-core verify-checkpoints output (a path or URL): every range's catchup is checked
    # against it (each attempt its range's one hash: entrypoint.sh). None: untrusted, as
    # stellar-core warns.
    trusted_hashes: str | None = None
    # How the span is cut (LENGTHS): auto, uniform, or cut to the previous profile for `parallelism`
    # slots; a backfill runs the saved plan's ranges, never a new cut. Once planned, what the plan
    # applied (auto's choice; uniform when there was no profile to cut to), and `lengths_asked` what
    # was asked, so the next mission asks it again (issue 37 item 1).
    lengths: str = "auto"
    lengths_asked: str | None = None
    # auto takes a cut of at most this many times the grid's node-hours (the setups it pays again),
    # and the cut itself is searched within it (core/plan/choose_lengths.py, issue 37 item 4).
    cut_node_hours_cap: float = bounded(DEFAULT_NODE_HOURS_CAP, ge=1.0, le=10.0)

    def __post_init__(self) -> None:
        validate_mission(self.mission)
        if self.order not in ORDERS:
            raise ConfigError(f"order: unknown order {self.order!r}: choose one of {', '.join(ORDERS)}")
        for name in ("lengths", "lengths_asked"):
            value = getattr(self, name)
            if value not in LENGTHS and not (name == "lengths_asked" and value is None):
                raise ConfigError(f"{name}: unknown {value!r}: choose one of {', '.join(LENGTHS)}")
        check_bounds(self)  # parallelism, deadline_seconds, cut_node_hours_cap and the dispatcher's settings
        if taken := sorted(TRUSTED_ENV & set(self.env)):
            raise ConfigError(f"env {taken[0]} is set by the dispatcher from trusted_hashes, not by hand")

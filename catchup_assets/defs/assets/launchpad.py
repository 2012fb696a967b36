"""What mission_plan accepts: its config with the deployment's defaults, and the limits on a plan.

The launchpad pre-fills a config from the config class's defaults. A class-level
default of production's grid (16000/320, parallelism 1000) offered in the demo's
instance would plan 3751 ranges there and retire the demo's partitions. So the
class is made per deployment from `CatchupResource.mission_defaults`, and a
plan that would retire more than `max_retire_share` of the partitions, or ask
for more than `max_parallelism` attempts in flight, is refused naming the field.

The bounds and the mission name's pattern are pydantic's, on the fields. Dagster's
launchpad check does not carry them (only types, fields and enums), so they are
enforced when the run builds the config, refused as a Failure naming the field.
`previous_profile: latest` (the default) is resolved when the plan runs, not when
the code location loads: the newest profile on the storage root at that moment.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import dagster as dg
import pydantic
from pydantic import Field
from pydantic.fields import FieldInfo

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import DEFAULT_PARALLELISM, MISSION_PATTERN, MISSION_RULE, MissionConfig
from catchup_assets.core.plan.ranges import DEFAULT_LEDGERS_PER_RANGE, DEFAULT_OVERLAP, MissionSpan
from catchup_assets.core.redact import redact_url, url_credentials
from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.defs.mission.run_context import refused
from catchup_assets.defs.resources import CatchupResource, MissionDefaultsConfig
from catchup_assets.store.credentials import ENV_NAME, SECRET_ENV_FIELD
from catchup_assets.store.profiles import newest_profile
from catchup_assets.store.root import Store

GRID_FIELDS = ("first_ledger", "ledgers_per_range", "overlap")
LATEST, NONE = "latest", "none"
ORDER = Literal["tip-first", "oldest-first", "longest-first"]
LENGTHS = Literal["auto", "uniform", "profile"]
LENGTHS_HELP = (
    "auto: the profile cut when it is expected to finish at least 5% sooner at most "
    "mission_defaults.cut_node_hours_cap x the grid's node-hours, else the grid (the plan's metadata says which "
    "and why); uniform: the fixed grid of ledgers_per_range; profile: that grid cut where the previous profile's "
    "ranges are slow and merged where they are fast, for `parallelism` slots (unprofiled: uniform)"
)


HOW_TO_PASS = (
    f"give the URL without them and name, in {SECRET_ENV_FIELD}, an environment variable the run pod has "
    "(from a Kubernetes Secret) that holds them: `user:password`, `Bearer <token>` or a presigned URL's query "
    "from its `?` on (docs/how-to.md, a private previous profile)"
)


def inline_credentials(config: Mapping[str, Any]) -> str | None:
    """Why a mission_plan config (as launched, before Dagster resolves it) carries credentials inline; None if not.

    The run config is kept in Dagster's run storage and shown to every UI user; credentials come by reference.
    Never quotes a value: only the names of what it found.
    """
    profile = config.get("previous_profile")
    if isinstance(profile, str) and (found := url_credentials(profile)):
        return (
            f"previous_profile carries credentials inline ({', '.join(found)}), which the run's config would keep "
            f"where every UI user reads it: {HOW_TO_PASS}"
        )
    name = config.get(SECRET_ENV_FIELD)
    if isinstance(name, str) and name and isinstance(profile, str) and profile.strip() in ("", LATEST, NONE):
        return (
            f"{SECRET_ENV_FIELD} names credentials for a previous_profile URL, but previous_profile is "
            f"{profile.strip() or 'empty'}, which reads none: leave {SECRET_ENV_FIELD} empty or give the URL"
        )
    if isinstance(name, str) and name and not ENV_NAME.fullmatch(name):
        return (
            f"{SECRET_ENV_FIELD} is not an environment variable's name (letters, digits and _, not first a digit): "
            "it names the variable that holds the credentials, never the credentials themselves"
        )
    return None


@dataclass(frozen=True)
class ProfileChoice:
    """The profile a plan is sized from (None: unprofiled), and the line saying how it was chosen."""

    path: str | None
    why: str


def choose_profile(spec: str, root: str) -> ProfileChoice:
    """`latest`: the newest range_profile.parquet on the storage root; `none` or empty: unprofiled; else `spec`."""
    spec = spec.strip()
    if spec in ("", NONE):
        return ProfileChoice(None, "previous_profile none: an unprofiled mission, every range on the no-profile tier")
    if spec != LATEST:
        return ProfileChoice(spec, f"previous_profile {redact_url(spec)}")  # the line is logged and kept
    newest = newest_profile(Store(root))
    if newest is None:
        shown = redact_url(root)  # a root URL's own credentials stay out of the line too
        return ProfileChoice(None, f"previous_profile latest: no mission on {shown} has a profile yet: unprofiled")
    mission, url = newest
    return ProfileChoice(
        url, f"previous_profile latest: {redact_url(url)}, mission {mission}'s, the newest on this storage root"
    )


def applied_order(order: str, profiled: bool) -> str:
    """How the ranges really start: longest-first ranks by the profile's seconds, so with none it is tip-first."""
    if order == "longest-first" and not profiled:
        return "tip-first (longest-first with no profile to rank by: every range unmeasured)"
    return order


def field_errors(exc: pydantic.ValidationError) -> str:
    """Pydantic's errors as one line per field, each naming it: what the refusal says."""
    out = []
    for e in exc.errors():
        field = ".".join(str(p) for p in e["loc"]) or "config"
        if e["type"] == "missing":
            out.append(f"{field}: required")
        elif field == "parallelism" and e["type"] == "less_than_equal":
            out.append(
                f"parallelism {e['input']} is above this deployment's cap, "
                f"mission_defaults.max_parallelism = {e['ctx']['le']}"
            )
        elif field == "mission":
            out.append(f"mission: {e['input']!r} is invalid: use {MISSION_RULE}, or leave it empty")
        else:  # the value quoted back redacted: a refusal is kept in the run's log
            out.append(f"{field}: {e['msg'].lower()}, got {redact_url(repr(e['input']))}")
    return "; ".join(out)


class MissionPlanConfig(dg.Config):
    """One mission. Everything is checked before a range is dispatched (L34)."""

    mission: str = Field(
        default="", pattern=f"^$|{MISSION_PATTERN}", description=f"name, {MISSION_RULE}; empty: m-<UTC time>"
    )
    first_ledger: int = Field(default=1, ge=1, description="first ledger of the span, >= 1")
    last_ledger: int = Field(ge=1, description="last ledger of the span (the tip)")
    ledgers_per_range: int = Field(default=DEFAULT_LEDGERS_PER_RANGE, gt=0, description="a multiple of 64")
    overlap: int = Field(default=DEFAULT_OVERLAP, ge=0, description="ledgers each range replays before its own")
    order: ORDER = Field(
        default="longest-first",
        description="longest-first: the previous profile's slowest ranges start first (unprofiled: tip-first)",
    )
    parallelism: int = Field(
        default=DEFAULT_PARALLELISM, ge=1, description="attempts in flight at once, across all runs of the mission"
    )
    lengths: LENGTHS = Field(default="auto", description=LENGTHS_HELP)
    previous_profile: str = Field(
        default=LATEST,
        description="latest: the newest range_profile.parquet on this storage root; none: unprofiled; "
        "else an earlier mission's range_profile.parquet (path or URL, without credentials: "
        f"{SECRET_ENV_FIELD} names where they are)",
    )
    previous_profile_secret_env: str = Field(
        default="",
        description="a private previous_profile's credentials: the name of an environment variable the run pod "
        "has (from a Kubernetes Secret) holding `user:password`, `Bearer <token>` or a presigned query from its "
        "`?` on (http), or a JSON object of storage options (s3://, gs://...); empty: none",
    )
    deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        description="each attempt's deadline in seconds (activeDeadlineSeconds on its pod); null: none",
    )
    trusted_hashes: str | None = Field(
        default=None,
        description="stellar-core verify-checkpoints output (path or URL, `catchup-assets verify-checkpoints`): "
        "every range catches up with --trusted-checkpoint-hashes; null: untrusted",
    )

    def __init__(self, **values):
        # Dagster's config check carries types, fields and enums but no bounds or patterns:
        # those are pydantic's, when the run builds this, and refused here naming the field.
        # Credentials are refused before Dagster stores a run (defs/mission/plan_job.py); here
        # too, whatever the value came from (an env var Dagster resolved), before any is read.
        if why := inline_credentials(values):
            raise refused("mission_plan config refused", ConfigError(why)) from None
        try:
            super().__init__(**values)
        except pydantic.ValidationError as exc:
            raise refused("mission_plan config refused", ConfigError(field_errors(exc))) from None

    def to_mission(self, catchup: CatchupResource, previous: ProfileChoice | None = None) -> MissionConfig:
        root = catchup.root()
        previous = previous or choose_profile(self.previous_profile, root)
        # The credentials are for the URL given: `latest` is the storage root's own profile.
        secret_env = self.previous_profile_secret_env if previous.path == self.previous_profile.strip() else ""
        return MissionConfig(
            mission=self.mission or time.strftime("m-%Y%m%d-%H%M%S", time.gmtime()),
            span=MissionSpan(self.first_ledger, self.last_ledger, self.ledgers_per_range, self.overlap),
            storage_root=root,
            parallelism=self.parallelism,
            order=self.order,
            lengths=self.lengths,
            cut_node_hours_cap=catchup.mission_defaults.cut_node_hours_cap,  # the deployment's, for auto
            previous_profile=previous.path,
            previous_profile_secret_env=secret_env or None,
            deadline_seconds=self.deadline_seconds,
            trusted_hashes=self.trusted_hashes or None,
            **policies(catchup),
        )


def policies(catchup: CatchupResource) -> dict:
    return dict(
        retry=catchup.retry_policy(),
        placement=catchup.placement(),
        poll_seconds=catchup.poll_seconds,
        status_every=catchup.status_every,
        stall_seconds=catchup.stall_seconds,
        stall_factor=catchup.stall_factor,
        breaker_attempts=catchup.breaker_attempts,
        profile_timeout_seconds=catchup.profile_timeout_seconds,
        profile_max_bytes=catchup.profile_max_bytes,
        profile_max_rows=catchup.profile_max_rows,
        env=catchup.attempt_env(),
    )


def mission_plan_config(defaults: MissionDefaultsConfig) -> type[MissionPlanConfig]:
    """MissionPlanConfig with this deployment's defaults (what the launchpad pre-fills) and its parallelism cap."""
    fields = MissionPlanConfig.model_fields
    spec = {}
    for name in GRID_FIELDS + ("order", "lengths", "parallelism", "last_ledger", "deadline_seconds"):
        value = getattr(defaults, name)
        if name == "last_ledger" and not value:
            continue  # no default tip: the launchpad asks for it
        extra = {"le": defaults.max_parallelism} if name == "parallelism" else {}
        # Merged, not replaced: the field keeps its bounds and description.
        spec[name] = (fields[name].annotation, FieldInfo.merge_field_infos(fields[name], Field(default=value, **extra)))
    return pydantic.create_model("MissionPlanConfig", __base__=MissionPlanConfig, **spec)


def superseded(existing: list[str], keys: list[str]) -> list[str]:
    """The existing keys a plan of `keys` overlaps without containing them (e.g. a tip that grew)."""
    planned = set(keys)
    new = [parse_key(k) for k in keys]
    out = []
    for old in existing:
        if old in planned:
            continue
        r = parse_key(old)
        if any(n.first <= r.last and r.first <= n.last for n in new):
            out.append(old)
    return out


def check_limits(config: MissionPlanConfig, defaults: MissionDefaultsConfig, existing: int, retiring: int) -> None:
    """Refuse a plan past the deployment's caps, naming the field (L34)."""
    if config.parallelism > defaults.max_parallelism:
        raise ConfigError(
            f"parallelism {config.parallelism} is above this deployment's cap, "
            f"mission_defaults.max_parallelism = {defaults.max_parallelism}"
        )
    if existing and retiring > defaults.max_retire_share * existing:
        changed = [f for f in GRID_FIELDS if getattr(config, f) != getattr(defaults, f)]
        fields = ", ".join(f"{f} = {getattr(config, f)} (this deployment's: {getattr(defaults, f)})" for f in changed)
        raise ConfigError(
            f"this plan would retire {retiring} of the {existing} existing partitions, more than "
            f"mission_defaults.max_retire_share = {defaults.max_retire_share:.0%}"
            + (f": {fields}" if fields else "")
            + "; plan on the same grid, or raise max_retire_share in the deployment's settings"
        )

"""An attempt's spec: its range sized by the mission's placement from the profile and the range's own past.

Pure: what the backend is asked to start, from the range, its attempt number and how
often it was OOM-killed, evicted and reclaimed (L13, L26, the on-demand fallback).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from catchup_assets.core.dispatch.ports import AttemptSpec
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.capacity import fell_back
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.values.ledger_range import LedgerRange

log = logging.getLogger(__name__)


def attempt_env(mission: MissionConfig, trusted: Mapping[str, tuple[int, str]], key: str) -> dict[str, str]:
    env = dict(mission.env)
    if key in trusted:  # entrypoint.sh writes it as a one-checkpoint --trusted-checkpoint-hashes file
        ledger, hex_hash = trusted[key]
        env.update(CATCHUP_TRUSTED_LEDGER=str(ledger), CATCHUP_TRUSTED_HASH=hex_hash)
    return env


def attempt_spec(
    mission: MissionConfig,
    profile: ProfileIndex | None,
    trusted: Mapping[str, tuple[int, str]],
    rng: LedgerRange,
    attempt: int,
    n_oom: int,
    n_evicted: int = 0,
    n_disrupted: int = 0,
) -> AttemptSpec:
    """The spec of `rng`'s attempt `attempt`, after that many OOMs, evictions and reclaims of its own."""
    placement = mission.placement
    s = placement.size(rng.last, profile, n_oom, n_evicted, n_disrupted, rng.first)
    if fell_back(placement.tiers.by_name(s.tier).capacity_type, s.capacity_type):
        log.info(
            "range %s attempt %d: reclaimed %d times, runs on on-demand capacity of tier %s",
            rng.key,
            attempt,
            n_disrupted,
            s.tier,
        )
    return AttemptSpec(
        mission=mission.mission,
        range_key=rng.key,
        attempt=attempt,
        target_ledger=rng.last,
        ledger_count=rng.catchup_count(mission.span.overlap),
        memory_request_bytes=s.memory_request_bytes,
        memory_limit_bytes=s.memory_limit_bytes,
        tier=s.tier,
        cpu_request=s.cpu_request,
        profiled=s.profiled,
        deadline_seconds=mission.deadline_seconds,
        env=attempt_env(mission, trusted, rng.key),
        ephemeral_bytes=s.ephemeral_bytes,
        capacity_type=s.capacity_type,
    )

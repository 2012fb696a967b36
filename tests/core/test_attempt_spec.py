"""An attempt's spec (core/dispatch/attempt_spec.py): the range sized from its own past, as a table
(L6 memory by OOM count, L26 disk by evictions, the on-demand fallback after reclaims, issue 24's hash)."""

from __future__ import annotations

import pytest

from catchup_assets.core.dispatch.attempt_spec import attempt_spec
from catchup_assets.core.plan.config import MissionConfig
from kit.dispatch import RANGES, SPAN

MISSION = MissionConfig("m1", SPAN, "/tmp/root", parallelism=3, poll_seconds=5, env={"A": "1"})
R = RANGES[0]
BASE = attempt_spec(MISSION, None, {}, R, 1, 0)

# (OOMs, evictions, reclaims) -> (limit x base, more disk than base, capacity type)
CASES = [
    ("first attempt", (0, 0, 0), (1.0, False, BASE.capacity_type)),
    ("one OOM: one rung up (L6)", (1, 0, 0), (1.5, False, BASE.capacity_type)),
    ("two OOMs: two rungs (L6)", (2, 0, 0), (2.25, False, BASE.capacity_type)),
]


@pytest.mark.parametrize("why, past, expected", CASES, ids=[c[0] for c in CASES])
def test_L6_the_spec_climbs_by_the_range_s_own_ooms(why, past, expected):
    s = attempt_spec(MISSION, None, {}, R, 2, *past)
    ratio = s.memory_limit_bytes / BASE.memory_limit_bytes
    assert (round(ratio, 2), (s.ephemeral_bytes or 0) > (BASE.ephemeral_bytes or 0), s.capacity_type) == expected


def test_the_spec_carries_the_range_its_attempt_and_the_trusted_hash():
    s = attempt_spec(MISSION, None, {R.key: (R.last, "ab" * 32)}, R, 3, 0)
    assert (s.range_key, s.attempt, s.target_ledger, s.mission) == (R.key, 3, R.last, "m1")
    assert s.env == {"A": "1", "CATCHUP_TRUSTED_LEDGER": str(R.last), "CATCHUP_TRUSTED_HASH": "ab" * 32}
    assert attempt_spec(MISSION, None, {}, R, 1, 0).env == {"A": "1"}

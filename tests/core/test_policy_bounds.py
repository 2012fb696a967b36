"""The policy dataclasses hold their bounds once, NaN and infinity included (issue 24 item 7; L34):
what the CLI and the core build directly is refused as the resource's configs refuse it, naming the knob."""

import pytest

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.sizing import MemoryLadder, SizingPolicy

NAN, INF = float("nan"), float("inf")

CASES = [
    (SizingPolicy, {"margin": NAN}, "sizing 'margin' must be a finite number >= 1 and <= 10, got nan"),
    (SizingPolicy, {"margin": INF}, "sizing 'margin' must be a finite number >= 1 and <= 10, got inf"),
    (SizingPolicy, {"cache_bump_ratio": NAN}, "sizing 'cache_bump_ratio'"),
    (SizingPolicy, {"cpu_request": 0}, "sizing 'cpu_request' must be a finite number > 0"),
    (SizingPolicy, {"cpu_request": INF}, "sizing 'cpu_request'"),
    (MemoryLadder, {"factor": INF}, "memory ladder 'factor' must be a finite number > 1"),
    (MemoryLadder, {"factor": NAN}, "memory ladder 'factor'"),
    (DiskPolicy, {"margin": NAN}, "disk 'margin'"),
    (DiskPolicy, {"factor": INF}, "disk 'factor'"),
    (RetryPolicy, {"environmental": -1}, "retry budget 'environmental' must be >= 0 and <= 1000, got -1"),
    (RetryPolicy, {"oom_rungs": 0}, "'oom_rungs' must be >= 1"),
]


@pytest.mark.parametrize("policy, values, says", CASES, ids=[f"{p.__name__}{v}" for p, v, _ in CASES])
def test_L34_a_policy_refuses_a_value_past_its_bounds_naming_the_knob(policy, values, says):
    with pytest.raises(ConfigError, match=says):
        policy(**values)


def test_L34_an_unset_cpu_request_still_means_the_tier_s_cpu():
    assert SizingPolicy().cpu_request is None and SizingPolicy(cpu_request=0.5).cpu_request == 0.5
